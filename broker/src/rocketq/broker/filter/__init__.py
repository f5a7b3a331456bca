"""Server-side message filters: the SQL92 property filter (``expressionType=SQL92``)."""
