OFFSET = 1


def widen(width: int) -> int:
    return 10 * width
