"""obda — streaming ontology-based data access with application time.

The Python API::

    import obda
    project = obda.Project.load("demo")
    compilation = project.compile(open("q.rq").read())
    print(compilation.to_sql("spark"))
    report = obda.analyze(compilation, project.sources)
    print(report.verdict)

Stages (one package each, data flowing one way): ``obda.ontology`` →
``obda.query`` → ``obda.rewrite`` → ``obda.mapping`` (R2RML parse, validate,
materialise, unfold) → ``obda.analysis`` → ``obda.execution``.
"""

from obda.errors import ObdaError
from obda.model.compilation import Compilation
from obda.model.sources import Sources
from obda.model.sources_file import load_sources
from obda.project import Project, validate_project

__all__ = ["Project", "Compilation", "Sources", "load_sources", "analyze", "validate_project", "ObdaError"]
__version__ = "0.1.0"


def analyze(source, sources=None):
    """Bounded-memory analysis of a Compilation or of SQL text (see ``obda.analysis``)."""
    from obda.analysis import analyze as _analyze

    return _analyze(source, sources)
