"""``heterosim validate``: predict published measurements and report the error.

cases (schema, loading) -> predict (case -> experiment or collective -> predicted value in the
case's own units) -> stats (error %, MAPE per group) -> report (results.json, parity plot).
"""
