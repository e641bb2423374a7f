"""Languages: `languages` (what messages are stemmed in) and `reindex` (detection, rebuilds, statistics)."""

from __future__ import annotations

from ..config import Settings
from .common import connection


def cmd_reindex(args, settings: Settings) -> int:
    from ..search.maintenance import fill_languages, fold, reindex

    with connection(settings) as conn:
        detected = fill_languages(conn, settings.language.language_batch_size, settings.language,
                                  progress=not args.quiet)
        swapped = reindex(conn, settings.search.reindex_batch_size, progress=not args.quiet)
        folded = fold(conn)
    print(f"reindexed: {', '.join(swapped) or 'nothing pending'}; {detected:,} messages' languages detected; "
          f"{folded:,} statistics deltas folded")
    return 0


def cmd_languages(args, settings: Settings) -> int:
    from ..errors import BackscrollError
    from ..language import SNOWBALL, detector
    from ..search.maintenance import language_counts

    with connection(settings) as conn:
        try:
            found = detector(conn, settings.language)
        except BackscrollError as exc:
            raise SystemExit(f"backscroll: {exc.message}") from None
        counts = language_counts(conn)
    print(f"detected (confidence >= {found.min_confidence:g}) and stemmed under `multilingual`: "
          f"{len(found.codes)} languages")
    for code in found.codes:
        print(f"  {code:<3} {SNOWBALL[code]:<12} {counts.pop(SNOWBALL[code], 0):>10,} messages")
    for name, n in counts.items():
        print(f"  {'':<3} {name:<12} {n:>10,} messages" + ("  (words only)" if name == "simple" else ""))
    return 0


def add_languages(sub) -> None:
    p = sub.add_parser("languages", help="the languages messages are stemmed in, and how many messages each holds")
    p.set_defaults(func=cmd_languages)


def add_reindex(sub) -> None:
    p = sub.add_parser("reindex", help="detect missing message languages, run pending workspace rebuilds to their "
                                       "swap and fold BM25 statistics")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_reindex)
