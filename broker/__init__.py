"""The Krait broker daemon: the asyncio shell around protocol/, storage/ and coordinator/."""
