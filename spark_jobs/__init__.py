"""PySpark data source over Krait segment files, and the analytics jobs run with spark-submit."""
