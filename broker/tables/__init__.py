"""Iceberg table topics on the event loop (issue 27): the driver that keeps each led
partition's committed records in its topic's table (``tables/`` holds the table logic)."""
