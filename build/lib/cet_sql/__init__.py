"""The SQL of the builds (``mimic/``: staging -> intermediate -> marts), shipped in the wheel as
the package ``cet_sql`` so an installed CET finds it with importlib.resources."""
