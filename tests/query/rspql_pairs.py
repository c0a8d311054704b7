"""RSP-QL queries over the turbine demo (demo/) and their hand-written obda forms (issue 27, evidence 5).

Shapes from the RSP literature (C-SPARQL, CQELS, RSP-QL/RSP4J examples, CityBench and SRBench): an
average per sensor over the last minutes, readings above a threshold in the window, bursts (HAVING),
a window joined with static data (``FROM <g>``), joins of two and three windows, ISTREAM of new answers,
``WINDOW ?w``.  Each pair must give the same answers: same SQL, same verdict (tests/query/test_rspql.py),
and the same output on the local backend for some (tests/integration/test_rspql.py).
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD = "PREFIX : <http://example.org/turbine#>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"


@dataclass(frozen=True)
class Pair:
    name: str
    rspql: str
    obda: str


def _d(text: str) -> str:
    return f'"{text}"^^xsd:dayTimeDuration'


PAIRS = [
    Pair("mean_temperature_per_sensor_last_10_minutes", HEAD + """\
REGISTER RSTREAM <http://example.org/out/mean> AS
SELECT ?sensor (AVG(?v) AS ?mean) (COUNT(*) AS ?n)
FROM NAMED WINDOW :w ON :measurements [RANGE PT10M STEP PT1M]
WHERE {
  WINDOW :w { ?m :measuredBy ?sensor ; :hasValue ?v . }
  ?turbine :hasSensor ?sensor .
}
GROUP BY ?sensor
""", HEAD + f"""\
SELECT ?sensor (AVG(?v) AS ?mean) (COUNT(*) AS ?n)
WHERE {{
  GRAPH ?t_w {{ ?m :measuredBy ?sensor ; :hasValue ?v . }}
  ?turbine :hasSensor ?sensor .
  FILTER(?t_w > NOW() - {_d("PT10M")})
}}
GROUP BY ?sensor
"""),
    Pair("readings_above_threshold_istream", HEAD + """\
REGISTER ISTREAM <http://example.org/out/hot> AS
SELECT ?sensor ?v
FROM NAMED WINDOW :w ON :measurements [RANGE PT1M STEP PT1M]
WHERE {
  WINDOW :w { ?m :measuredBy ?sensor ; :hasValue ?v . }
  FILTER(?v > 90)
}
""", HEAD + """\
SELECT ?sensor ?v WHERE {
  GRAPH ?t_w { ?m :measuredBy ?sensor ; :hasValue ?v . }
  FILTER(?v > 90)
}
"""),
    Pair("temperature_readings_in_fahrenheit_istream", HEAD + """\
REGISTER ISTREAM <http://example.org/out/fahrenheit> AS
SELECT ?sensor ?fahrenheit
FROM NAMED WINDOW :last ON :measurements [RANGE PT5M STEP PT1M]
WHERE {
  ?sensor a :TemperatureSensor .
  WINDOW :last { ?m :measuredBy ?sensor ; :hasValue ?v . }
  BIND(?v * 9 / 5 + 32 AS ?fahrenheit)
  FILTER(?fahrenheit > 190)
}
""", HEAD + """\
SELECT ?sensor ?fahrenheit WHERE {
  ?sensor a :TemperatureSensor .
  GRAPH ?t_last { ?m :measuredBy ?sensor ; :hasValue ?v . }
  BIND(?v * 9 / 5 + 32 AS ?fahrenheit)
  FILTER(?fahrenheit > 190)
}
"""),
    Pair("alarm_bursts_having", HEAD + """\
REGISTER RSTREAM <http://example.org/out/bursts> AS
SELECT ?sensor (COUNT(*) AS ?alarms) (MAX(?sev) AS ?worst)
FROM NAMED WINDOW <http://example.org/win/alarms> ON <http://example.org/stream/alarm> [RANGE PT5M STEP PT30S]
WHERE {
  WINDOW <http://example.org/win/alarms> { ?a :raisedBy ?sensor ; :hasSeverity ?sev . }
  ?turbine :hasSensor ?sensor .
}
GROUP BY ?sensor
HAVING (COUNT(*) >= 2)
""", HEAD + f"""\
SELECT ?sensor (COUNT(*) AS ?alarms) (MAX(?sev) AS ?worst)
WHERE {{
  GRAPH ?t_alarms {{ ?a :raisedBy ?sensor ; :hasSeverity ?sev . }}
  ?turbine :hasSensor ?sensor .
  FILTER(?t_alarms > NOW() - {_d("PT5M")})
}}
GROUP BY ?sensor
HAVING (COUNT(*) >= 2)
"""),
    Pair("power_per_site_window_and_static_graph", HEAD + """\
REGISTER RSTREAM <http://example.org/out/power> AS
SELECT ?site (SUM(?out) AS ?energy) (MAX(?out) AS ?peak)
FROM <http://example.org/turbine/static>
FROM NAMED WINDOW :p ON :power [RANGE PT4M STEP PT1M]
WHERE {
  WINDOW :p { ?r :ofTurbine ?turbine ; :hasOutput ?out . }
  ?turbine :locatedAt ?site .
}
GROUP BY ?site
""", HEAD + f"""\
SELECT ?site (SUM(?out) AS ?energy) (MAX(?out) AS ?peak)
WHERE {{
  GRAPH ?t_p {{ ?r :ofTurbine ?turbine ; :hasOutput ?out . }}
  ?turbine :locatedAt ?site .
  FILTER(?t_p > NOW() - {_d("PT4M")})
}}
GROUP BY ?site
"""),
    Pair("readings_joined_with_alarms_two_windows", HEAD + """\
REGISTER ISTREAM <http://example.org/out/joined> AS
SELECT ?sensor ?v ?sev
FROM NAMED WINDOW :mw ON :measurements [RANGE PT3M STEP PT1M]
FROM NAMED WINDOW :aw ON :alarms [RANGE PT2M STEP PT1M]
WHERE {
  WINDOW :mw { ?m :measuredBy ?sensor ; :hasValue ?v . }
  WINDOW :aw { ?a :raisedBy ?sensor ; :hasSeverity ?sev . }
  FILTER(?v > 50)
}
""", HEAD + f"""\
SELECT ?sensor ?v ?sev WHERE {{
  GRAPH ?t_mw {{ ?m :measuredBy ?sensor ; :hasValue ?v . }}
  GRAPH ?t_aw {{ ?a :raisedBy ?sensor ; :hasSeverity ?sev . }}
  FILTER(?v > 50)
  FILTER(?t_aw < ?t_mw + {_d("PT3M")} && ?t_mw < ?t_aw + {_d("PT2M")})
}}
"""),
    Pair("hot_readings_near_maintenance_two_windows_and_static", HEAD + """\
REGISTER ISTREAM <http://example.org/out/after-maintenance> AS
SELECT ?turbine ?v
FROM NAMED WINDOW :maint ON :maintenance [RANGE PT10M STEP PT1M]
FROM NAMED WINDOW :temp ON :measurements [RANGE PT1M STEP PT1M]
WHERE {
  WINDOW :maint { ?e :onTurbine ?turbine . }
  WINDOW :temp { ?m :measuredBy ?sensor ; :hasValue ?v . }
  ?turbine :hasSensor ?sensor .
  FILTER(?v > 90)
}
""", HEAD + f"""\
SELECT ?turbine ?v WHERE {{
  GRAPH ?t_maint {{ ?e :onTurbine ?turbine . }}
  GRAPH ?t_temp {{ ?m :measuredBy ?sensor ; :hasValue ?v . }}
  ?turbine :hasSensor ?sensor .
  FILTER(?v > 90 && ?t_temp < ?t_maint + {_d("PT10M")} && ?t_maint < ?t_temp + {_d("PT1M")})
}}
"""),
    Pair("readings_overall_global_window", HEAD + """\
REGISTER RSTREAM <http://example.org/out/overall> AS
SELECT (COUNT(?v) AS ?n) (SUM(?v) AS ?total)
FROM NAMED WINDOW :w ON :measurements [RANGE PT2M STEP PT30S]
WHERE { WINDOW :w { ?m :measuredBy ?s ; :hasValue ?v . } }
""", HEAD + f"""\
SELECT (COUNT(?v) AS ?n) (SUM(?v) AS ?total)
WHERE {{
  GRAPH ?t_w {{ ?m :measuredBy ?s ; :hasValue ?v . }}
  FILTER(?t_w > NOW() - {_d("PT2M")})
}}
"""),
    Pair("critical_alarms_window_variable", HEAD + """\
REGISTER ISTREAM <http://example.org/out/critical> AS
SELECT ?turbine ?sensor
FROM NAMED WINDOW :w ON :alarms [RANGE PT1H]
WHERE {
  WINDOW ?w { ?a a :CriticalAlarm ; :raisedBy ?sensor . }
  ?turbine :hasSensor ?sensor .
}
""", HEAD + """\
SELECT ?turbine ?sensor WHERE {
  GRAPH ?t_w { ?a a :CriticalAlarm ; :raisedBy ?sensor . }
  ?turbine :hasSensor ?sensor .
}
"""),
    Pair("distinct_severities_istream_changelog", HEAD + """\
REGISTER ISTREAM <http://example.org/out/severities> AS
SELECT ?sensor (COUNT(DISTINCT ?sev) AS ?severities)
FROM NAMED WINDOW :w ON :alarms [RANGE PT5M STEP PT1M]
WHERE {
  WINDOW :w { ?a :raisedBy ?sensor ; :hasSeverity ?sev . }
  ?turbine :hasSensor ?sensor .
}
GROUP BY ?sensor
""", HEAD + f"""\
SELECT ?sensor (COUNT(DISTINCT ?sev) AS ?severities)
WHERE {{
  GRAPH ?t_w {{ ?a :raisedBy ?sensor ; :hasSeverity ?sev . }}
  ?turbine :hasSensor ?sensor .
  FILTER(?t_w > NOW() - {_d("PT5M")})
}}
GROUP BY ?sensor
"""),
    Pair("peak_output_of_wind_turbines", HEAD + """\
REGISTER RSTREAM <http://example.org/out/peak> AS
SELECT ?turbine (MAX(?out) AS ?peak) (MIN(?out) AS ?low)
FROM <http://example.org/turbine/assets>
FROM NAMED WINDOW :w ON :power [RANGE PT15M STEP PT5M]
WHERE {
  ?turbine a :WindTurbine .
  WINDOW :w { ?r :ofTurbine ?turbine ; :hasOutput ?out . }
}
GROUP BY ?turbine
""", HEAD + f"""\
SELECT ?turbine (MAX(?out) AS ?peak) (MIN(?out) AS ?low)
WHERE {{
  ?turbine a :WindTurbine .
  GRAPH ?t_w {{ ?r :ofTurbine ?turbine ; :hasOutput ?out . }}
  FILTER(?t_w > NOW() - {_d("PT15M")})
}}
GROUP BY ?turbine
"""),
    Pair("alarm_then_reading_then_maintenance_three_windows", HEAD + """\
REGISTER ISTREAM <http://example.org/out/incidents> AS
SELECT ?turbine ?sev ?v
FROM NAMED WINDOW :a ON :alarms [RANGE PT5M STEP PT1M]
FROM NAMED WINDOW :m ON :measurements [RANGE PT2M STEP PT1M]
FROM NAMED WINDOW :n ON :maintenance [RANGE PT10M STEP PT1M]
WHERE {
  WINDOW :a { ?x :raisedBy ?sensor ; :hasSeverity ?sev . }
  WINDOW :m { ?y :measuredBy ?sensor ; :hasValue ?v . }
  WINDOW :n { ?e :onTurbine ?turbine . }
  ?turbine :hasSensor ?sensor .
  FILTER(?sev >= 4 && ?v > 80)
}
""", HEAD + f"""\
SELECT ?turbine ?sev ?v WHERE {{
  GRAPH ?t_a {{ ?x :raisedBy ?sensor ; :hasSeverity ?sev . }}
  GRAPH ?t_m {{ ?y :measuredBy ?sensor ; :hasValue ?v . }}
  GRAPH ?t_n {{ ?e :onTurbine ?turbine . }}
  ?turbine :hasSensor ?sensor .
  FILTER(?sev >= 4 && ?v > 80)
  FILTER(?t_m < ?t_a + {_d("PT5M")} && ?t_n < ?t_a + {_d("PT5M")}
      && ?t_a < ?t_m + {_d("PT2M")} && ?t_n < ?t_m + {_d("PT2M")}
      && ?t_a < ?t_n + {_d("PT10M")} && ?t_m < ?t_n + {_d("PT10M")})
}}
"""),
    Pair("no_register_union_in_one_window", HEAD + """\
SELECT ?sensor ?level
FROM NAMED WINDOW :w ON :events [RANGE PT30M]
WHERE {
  WINDOW :w {
    { ?m :measuredBy ?sensor ; :hasValue ?level . FILTER(?level > 95) }
    UNION
    { ?a :raisedBy ?sensor ; :hasSeverity ?level . FILTER(?level >= 4) }
  }
}
""", HEAD + """\
SELECT ?sensor ?level WHERE {
  GRAPH ?t_w {
    { ?m :measuredBy ?sensor ; :hasValue ?level . FILTER(?level > 95) }
    UNION
    { ?a :raisedBy ?sensor ; :hasSeverity ?level . FILTER(?level >= 4) }
  }
}
"""),
]
