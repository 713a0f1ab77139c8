"""Krait's Kafka wire protocol: a pure codec (bytes in, objects out, and back), no I/O."""
