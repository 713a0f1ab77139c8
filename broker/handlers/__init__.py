"""One module per Kafka API family."""
