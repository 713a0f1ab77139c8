"""Client-side code shipped with the broker: the one wire client (:mod:`.wire`), the
admin client, the ``krait topics`` / ``krait groups`` / ``krait log-dirs`` commands and
``krait perf``. Nothing here runs inside the daemon; the daemon never imports it."""
