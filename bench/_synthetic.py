"""Words the benchmarks build synthetic answers from: everyday advice with some words VADER
scores positive or negative, so that scores and degradation are not all zero. The scripts in
this folder import it as ``_synthetic`` (Python puts a script's own folder on sys.path)."""

WORDS = (
    "you can compare the fees of several banks and ask for accessible statements plan your budget "
    "ahead with a list of options many people find it helpful to talk with an advisor about savings "
    "goals screen readers captions and large print are available on request some services offer "
    "support unfortunately this may be difficult and frustrating but great resources exist sadly "
    "not every office is welcoming happy to help wonderful terrible worried hopeful no never"
).split()


def in_fresh_process(function, *args):
    """``function(*args)`` in a fresh interpreter (multiprocessing 'spawn'); its result.

    For what builds big inputs: a child's peak RSS as the kernel reports it (``ru_maxrss``)
    starts from the size of the parent that started it, so a benchmark that measured its
    children from a parent holding a million rows would charge them for those rows.
    """
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)
