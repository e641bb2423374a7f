"""Mutants of the disclosure predicates (sql/definitions/20_disclosure.sql and 30_lineage.sql) and
what each must do.

- the audience predicate replaced with `true`: every test marked `privacy` fails, each with a
  named disclosure;
- the lineage walk replaced with `true`: exactly the lineage tests fail (those named
  `*lineage*`, plus at most the tests marked `lineage`, such as the property test, which also
  checks lineage among other rules).
"""

from __future__ import annotations

from dataclasses import dataclass

from mutants import Mutant

# The predicates as they stand: each function's one definition, applied after the migrations (a
# mutant of a migration's historical text would be overridden, and survive).
AUDIENCE = IDENTITIES = FAIL_CLOSED = RECEIVABLE = "sql/definitions/20_disclosure.sql"
DISCLOSURE = VERDICTS = "sql/definitions/30_lineage.sql"


@dataclass(frozen=True)
class ExpectingMutant(Mutant):
    expect: str = "any"  # any | all_privacy | exactly_lineage
    named: str = ""      # when set, a failing test's name must contain it (the test written for this case)
    suites: tuple[str, ...] = ()  # when set, the suites run for it (else its file's, run.SUITES_FOR)


# Issue 29: the channels around the rows. Each reopens one and must be caught by the test of the
# non-interference suite written for it (answers compared with and without rows outside the
# caller's scope); only those tests run, not the randomized property (a minute and a half).


def noninterference(*tests: str) -> tuple[str, ...]:
    return tuple(f"tests/db/test_noninterference.py::{t}" for t in tests)


HISTORY_MUTANTS = [
    ExpectingMutant("disclosure: audience predicate", AUDIENCE, "backscroll_audience_allows",
                    """select coalesce(case o_kind
        when 'public' then true""", """select true or coalesce(case o_kind
        when 'public' then true""", expect="all_privacy"),
    ExpectingMutant("disclosure: lineage walk", DISCLOSURE, "backscroll_lineage_allows",
                    "return nodes <= 5000 and denied = 0;", "return true;", expect="exactly_lineage"),
    # The audit's lineage counts come from one batched walk; it and the walk of one root take each
    # node's verdict from backscroll_lineage_node_allows. The exclusion-count tests kill each
    # weakening of the batch's per-root verdict, the lineage tests each weakening of a node's.
    ExpectingMutant("audit: lineage verdicts per pool member", VERDICTS, "backscroll_lineage_denied",
                    "where not (r.nodes <= 5000 and r.allowed)", "where false"),
    ExpectingMutant("audit: lineage verdicts, a message node's audience", VERDICTS, "backscroll_lineage_node_allows",
                    "backscroll_disclosable(p_agent, m.conversation_id, m.audience_kind",
                    "backscroll_disclosable(p_agent, m.conversation_id, 'public'::audience_kind"),
    ExpectingMutant("audit: lineage verdicts, a memory's audience", VERDICTS, "backscroll_lineage_node_allows",
                    "k.audience_kind, k.audience_namespace, k.audience_readers",
                    "'public'::audience_kind, k.audience_namespace, k.audience_readers"),
    ExpectingMutant("disclosure: source evidence in search", "backscroll/search/history_sql.py", "EXCLUDED_BEFORE_AUDIENCE",
                    "when not exists (select 1 from message_source_evidence e where e.message_id = r.id) then 'no_evidence'",
                    "when false then 'no_evidence'"),
    ExpectingMutant("disclosure: perspective re-derived through connectors", "backscroll/search/history_sql.py", "SEARCH_RANKING",
                    "and cn.agent_id = %(agent)s", ""),
    ExpectingMutant("disclosure: loaded window excluded", "backscroll/search/history_sql.py", "EXCLUDED_BEFORE_AUDIENCE",
                    "when r.id = any(%(in_context)s::bigint[]) then 'already_in_context'",
                    "when false then 'already_in_context'"),
    ExpectingMutant("disclosure: neighbours pass the audience predicate", "backscroll/search/history_sql.py",
                    "NEIGHBOUR_PREDICATES",
                    "backscroll_disclosable(%(agent)s, m.conversation_id, m.audience_kind",
                    "backscroll_disclosable(%(agent)s, m.conversation_id, 'public'::audience_kind"),
    # The vector candidate list is a filtered index scan with its own copies of the predicates:
    # test_the_vector_list_is_produced_under_the_same_predicates (tests/semantic) kills each.
    ExpectingMutant("hybrid: vector list, perspective re-derived through connectors", "backscroll/search/history_sql.py",
                    "PERSPECTIVE_FILTERS", "and cn.agent_id = %(agent)s", ""),
    ExpectingMutant("hybrid: vector list, loaded window excluded", "backscroll/search/history_sql.py", "VECTOR_ELIGIBLE",
                    "and not (m.id = any(%(in_context)s::bigint[]))", "and true"),
    ExpectingMutant("hybrid: vector list, source evidence", "backscroll/search/history_sql.py", "VECTOR_ELIGIBLE",
                    "and exists (select 1 from message_source_evidence ev where ev.message_id = m.id)", "and true"),
    ExpectingMutant("disclosure: search and vector lists, audience into the destination", "backscroll/search/history_sql.py",
                    "DESTINATION_ALLOWS",
                    "backscroll_audience_allows(m.audience_kind", "backscroll_audience_allows('public'::audience_kind"),
    ExpectingMutant("hybrid: exact vector list, only the configured model's vectors", "backscroll/search/history_sql.py",
                    "VECTOR_EXACT", "and e.model = %(model)s", "and true"),
    ExpectingMutant("hybrid: HNSW vector list, only the configured model's vectors", "backscroll/search/history_sql.py",
                    "VECTOR_HNSW", "where e.model = %(model)s", "where true"),
    ExpectingMutant("hybrid: public-destination vector list, only the configured model's vectors",
                    "backscroll/search/history_sql.py", "VECTOR_PUBLIC", "and e.model = %(model)s", "and true"),
    ExpectingMutant("disclosure: identity links must be live", IDENTITIES, "backscroll_linked_identities",
                    "and l.revoked_at is null", ""),
    # SEARCH and both vector lists share DESTINATION_ALLOWS: its identity branch must admit only the
    # destination reader's linked identities.
    ExpectingMutant("disclosure: search's identity branch only for the reader's linked identities",
                    "backscroll/search/history_sql.py", "DESTINATION_ALLOWS",
                    "from backscroll_linked_identities(%(agent)s, %(d_namespace)s, (%(d_readers)s::text[])[1]) li",
                    "from (select a.namespace, a.external_id from actors a) li"),
    ExpectingMutant("recheck: destination audience", "backscroll/search/turns.py", "RECHECK_ROWS",
                    "backscroll_disclosable(%(agent)s, m.conversation_id, m.audience_kind",
                    "backscroll_disclosable(%(agent)s, m.conversation_id, 'public'::audience_kind"),
    # Issue 16: an external conversation's readers decide where it goes; an empty or unknown set
    # never widens a verdict; a row stored with no readers is sealed to its own conversation.
    ExpectingMutant("fail closed: external readers ignored", AUDIENCE, "backscroll_audience_allows",
                    """when 'external' then d_kind in ('members', 'external') and d_namespace = o_namespace and o_namespace <> ''
                             and cardinality(d_readers) > 0 and d_readers <@ o_readers""",
                    "when 'external' then d_kind in ('members', 'external') and d_namespace = o_namespace",
                    named="external"),
    ExpectingMutant("fail closed: an empty external destination accepted as a subset", AUDIENCE,
                    "backscroll_audience_allows",
                    """when 'external' then d_kind in ('members', 'external') and d_namespace = o_namespace and o_namespace <> ''
                             and cardinality(d_readers) > 0 and d_readers <@ o_readers""",
                    """when 'external' then d_kind in ('members', 'external') and d_namespace = o_namespace and o_namespace <> ''
                             and d_readers <@ o_readers""", named="empty"),
    # Issue 29, item 6: a shared channel reaches its own members' DMs, never a DM of someone
    # outside it, nor does a private room reach a shared channel.
    ExpectingMutant("audience: a shared channel reaches any DM of its namespace", AUDIENCE, "backscroll_audience_allows",
                    "and cardinality(d_readers) > 0 and d_readers <@ o_readers\n    end",
                    "and cardinality(d_readers) > 0 and (d_kind = 'members' or d_readers <@ o_readers)\n    end",
                    named="shared_channel"),
    ExpectingMutant("audience: a private room reaches a shared channel", AUDIENCE, "backscroll_audience_allows",
                    "when 'members' then d_kind = 'members' and", "when 'members' then d_kind in ('members', 'external') and",
                    named="shared_channel"),
    ExpectingMutant("fail closed: a sealed row reaches other conversations", FAIL_CLOSED, "backscroll_sealed_allows",
                    "and o_conversation = d_conversation", "", named="empty"),
    # Search's candidates come from the audience keys the destination may receive (migration
    # 0027): a sealed key is receivable only in its own conversation. (DESTINATION_ALLOWS checks
    # the same again for the vector list and the classification; weakening it there alone changes
    # no answer, so it is not a mutant of its own.)
    ExpectingMutant("fail closed: search takes every sealed row for the destination's own",
                    RECEIVABLE, "backscroll_receivable_audiences",
                    "backscroll_sealed_allows(a.sealed_conversation, a.kind",
                    "backscroll_sealed_allows(d_conversation, a.kind", named="sound_and_complete"),
    ExpectingMutant("fail closed: the recheck takes every sealed row for the destination's own",
                    "backscroll/search/turns.py", "RECHECK_ROWS",
                    "backscroll_disclosable(%(agent)s, m.conversation_id",
                    "backscroll_disclosable(%(agent)s, %(d_conversation)s::bigint", named="empty"),
    ExpectingMutant("disclosure: identity links must be verified", IDENTITIES, "backscroll_linked_identities",
                    "and l.verified_at is not null", "", named="unverified"),
    ExpectingMutant("disclosure: search's requester identities only through verified links", "backscroll/search/history_sql.py",
                    "RESOLVE_LINKED", "and l.verified_at is not null", "", named="unverified"),
    ExpectingMutant("non-interference: search_history statistics over every audience", "backscroll/search/ranking.py",
                    "SCOPES", " and audience_id = any(%(audiences)s::bigint[])", "",
                    named="scores_do_not_move_with_dms",
                    suites=noninterference("test_search_history_scores_do_not_move_with_dms_of_another_person")),
    ExpectingMutant("non-interference: every audience key receivable", RECEIVABLE,
                    "backscroll_receivable_audiences",
                    "and (backscroll_audience_allows(a.kind", "and (true or backscroll_audience_allows(a.kind",
                    suites=noninterference("test_search_history_scores_do_not_move_with_dms_of_another_person")),
    ExpectingMutant("non-interference: search_history candidates from every audience", "backscroll/search/history_sql.py",
                    "SEARCH_LEXICAL", "and s.audience_id = any(%(audiences)s::bigint[])", "and true",
                    named="candidate_pool", suites=noninterference("test_hidden_matches_never_take_a_place_in_the_candidate_pool")),
    ExpectingMutant("non-interference: search_history candidates walked through every audience",
                    "backscroll/search/history_sql.py", "SEARCH_LEXICAL",
                    "from unnest(%(audiences)s::bigint[]) as a(id)",
                    "from (select distinct x.audience_id from message_search x where x.agent_id = %(agent)s::bigint) as a(id)",
                    named="walked_pool",
                    suites=noninterference("test_hidden_matches_never_take_a_place_in_the_walked_pool")),
    ExpectingMutant("non-interference: a room's title without the room's own check", "backscroll/search/history_sql.py",
                    "HYDRATE", "case when r.disclosed then c.title end as title", "c.title as title",
                    named="title", suites=noninterference("test_a_room_reposted_private_hands_its_new_title_to_no_public_destination",
                                                          "test_a_public_message_in_a_members_room_hands_out_no_room_title")),
    ExpectingMutant("non-interference: requester_spoke over every message", "backscroll/search/history_sql.py",
                    "SEARCH_RANKING", "= any(%(audiences)s::bigint[])\n       and exists", "is not null\n       and exists",
                    named="requester_spoke",
                    suites=noninterference("test_requester_spoke_counts_only_what_the_destination_may_receive")),
    ExpectingMutant("non-interference: search_history coverage over the whole agent", "backscroll/search/hybrid.py",
                    "def gather", "with_backfill_coverage(conn, qv, scope_agents, audiences)",
                    "with_backfill_coverage(conn, qv, scope_agents)",
                    named="coverage", suites=noninterference("test_hybrid_coverage_counts_only_what_the_caller_may_see")),
    ExpectingMutant("non-interference: session statistics over the workspace", "backscroll/search/sessions.py",
                    "def statistics_agents", "return list(scope.agent_ids)",
                    "return [*scope.agent_ids, *scope.other_agent_ids]",
                    named="session_search_scores",
                    suites=noninterference("test_session_search_scores_do_not_move_with_another_agents_messages")),
]
