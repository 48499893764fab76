"""The Spark source and sink, streaming, the tools/ jobs and charts (src/logbroker/spark)."""
