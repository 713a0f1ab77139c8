"""The group coordinator (a pure state machine) and the __consumer_offsets record codecs."""
