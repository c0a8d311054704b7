"""obda's HTTP service (FastAPI): analyse SPARQL, register continuous queries, watch their answers.

    from api import Settings, create_app
    app = create_app(Settings(project_dir="demo", token="s3cret-token", backend="local"))

Run it with ``obda serve --project demo --token ...`` (uvicorn).
"""

from api.app import create_app
from api.settings import Settings

__all__ = ["Settings", "create_app"]
