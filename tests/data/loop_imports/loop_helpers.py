"""The helper module beside loop.py; it imports a package below the loop's folder."""

from loop_tools.scale import double

UNIT = 3


def make_model(width: int) -> dict:
    return {"layers": double(width) * UNIT, "made_by": __name__}
