"""The composer: draws conversations from the templates with a seeded random generator (same
conversations, same external ids every run; only timestamps follow the clock), adds the
memorable conversations the guide points at, and returns them as import lines."""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone


from .. import ingest
from .data import (
    ACME_SLACK, ACME_STAFF, ACME_WEB, AGENT_NAMES, BRIEFINGS, CARS, CITIES, COMPANIES, CONCIERGE_GUEST,
    CONCIERGE_STAFF, CONVERSATION_PREFIX, CUSTOMER_CLOSERS, DAYS, DAYS_OF_WEEK, DB_MIGRATION, DIETS,
    DISHES, DISPATCH, DOMAINS, DRIVER_SMS, EVENTS_CLIENT, EVENTS_ROOM, EVENTS_STAFF, EVENT_ROOMS,
    FEATURES, FIRST, FLIGHTS, FLOWERS, FRONT_DESK_CHANNEL, FRONT_OFFICE_ROOM, GH_EMAIL, GH_SLACK,
    GH_STAFF, GH_WEB, GUEST_CLOSERS, GUIDES, HANDOVERS, HOSTS, IDPS, INCIDENT_ROOM, ISSUES, ITEMS, LAST,
    MIGRATION_STEPS, MONTHS, NW_SLACK, NW_SMS, NW_STAFF, OCCASIONS, OPS_CHANNEL, PLANS, PORTS, Person,
    RESTAURANTS, SEED, SERVICES, SRE_DM, STAFF_CLOSERS, SUPPORT, SYMPTOMS, TIMES, TOPICS, TOURS,
    TREATMENTS, Topic, WINES,
)


class _Slots(dict):
    def __missing__(self, key: str) -> str:
        raise KeyError(f"demo template names an unknown slot {{{key}}}")


def _fill(template: str, slots: dict) -> str:
    return template.format_map(slots)


@dataclass
class _Composer:
    rng: random.Random
    now: datetime
    lines: list[tuple[str, ingest.ImportLine]] = field(default_factory=list)
    seq: dict[str, int] = field(default_factory=dict)

    def slots(self, **extra) -> _Slots:
        r = self.rng
        restaurant, blurb = r.choice(RESTAURANTS)
        tour, tour_blurb = r.choice(TOURS)
        issue, detail, sorry, fix = r.choice(ISSUES)
        eventroom, capacity = r.choice(EVENT_ROOMS)
        mig_step, mig_advice = r.choice(MIGRATION_STEPS)
        symptom, cause, mitigation = r.choice(SYMPTOMS)
        time1, time2 = r.sample(TIMES, 2)
        headcount = r.randrange(20, 180, 5)
        delta = r.randint(2, 12)
        room = r.randint(2, 8) * 100 + r.randint(1, 30)
        pallets2 = r.randint(18, 33)
        s = _Slots(
            day=r.choice(DAYS_OF_WEEK), nth=_nth(r.randint(1, 28)), month=r.choice(MONTHS),
            time=time1, time2=time2, n=r.randint(2, 6), flight=r.choice(FLIGHTS), car=r.choice(CARS),
            price=r.randrange(45, 400, 5), small_price=r.randrange(15, 40, 5), parking=r.choice([25, 30, 35]),
            restaurant=restaurant, restaurant_blurb=blurb, diet=r.choice(DIETS), item=r.choice(ITEMS),
            room=room, room2=room + r.choice([2, 4, 6, 10]), floor=room // 100,
            checkout_time=r.choice(["14:00", "15:00", "16:00"]),
            next_arrival=r.choice(["none today", "18:00", "21:30"]), treatment=r.choice(TREATMENTS),
            lf=r.randint(1000, 9999), occasion=r.choice(OCCASIONS), flowers=r.choice(FLOWERS), wine=r.choice(WINES),
            tour=tour, tour_blurb=tour_blurb, guide=r.choice(GUIDES), vat=r.randint(500_000_000, 599_999_999),
            guest2=f"{r.choice(['Mr', 'Ms', 'Dr'])} {r.choice(LAST)}", issue=issue, issue_detail=detail,
            issue_sorry=sorry, issue_fix=fix, occ=r.randint(71, 104), handover=r.choice(HANDOVERS),
            wake=r.choice(["5:30", "6:00", "6:45"]), arrivals=r.randint(20, 90), departures=r.randint(20, 90),
            briefing=r.choice(BRIEFINGS), headcount=headcount, headcount2=headcount + delta, delta=delta,
            eventroom=eventroom, eventroom_cap=eventroom[0].upper() + eventroom[1:], capacity=capacity,
            pp=r.randrange(85, 190, 5), company=r.choice(COMPANIES), beo=r.randint(2000, 2999),
            dish=r.choice(DISHES), idp=r.choice(IDPS), tenant=r.choice(["globex", "initech", "umbrella", "hooli"]),
            plan=r.choice(PLANS), rate=r.choice([300, 600, 1200]), status=r.choice(["502", "504", "401", "500"]),
            invoice=f"INV-{r.randint(10000, 99999)}", seats=r.randint(12, 250), feature=r.choice(FEATURES),
            host=r.choice(HOSTS), pct=r.randint(86, 97), pct2=r.randint(40, 60), domain=r.choice(DOMAINS),
            topic=r.choice(TOPICS), service=r.choice(SERVICES),
            version=f"v{r.randint(2, 4)}.{r.randint(0, 40)}.{r.randint(0, 9)}",
            mig_step=mig_step, mig_advice=mig_advice, symptom=symptom, cause=cause, mitigation=mitigation,
            incident=f"INC-{r.randint(400000, 499999)}", p99=r.randint(900, 4000), eps=r.randint(3, 60),
            week=r.randint(1, 52), ship=r.randint(10000, 99999), port=r.choice(PORTS), city=r.choice(CITIES),
            container=f"{r.choice(['MSKU', 'CMAU', 'HLXU', 'TGHU'])}{r.randint(1000000, 9999999)}",
            temp=r.choice([9.5, 11.2, 14.8]), pallets=pallets2 - r.randint(1, 3), pallets2=pallets2,
            road=r.choice([2, 12, 15, 27]),
        )
        s.update(extra)
        return s

    def _start(self, duration: timedelta, *, days: float | None = None) -> datetime:
        """A start time in the last DAYS days, denser towards now, leaving room for the thread."""
        if days is None:
            days = DAYS * self.rng.random() ** 1.5
        start = self.now - timedelta(days=days)
        latest = self.now - duration - timedelta(minutes=2)
        return min(start, latest)

    def add(self, ws: str, agent: str, connector: str, *, title: str, creator: Person | None,
            audience: ingest.Audience | None, turns: list[tuple[str, Person | None, str]],
            key: str | None = None, gap_minutes: tuple[float, float] = (0.5, 6), days: float | None = None,
            followup: list[tuple[str, Person | None, str]] | None = None, reactivate: bool | None = None,
            streaming_last: bool = False) -> str:
        r = self.rng
        ctype, cname = connector.split(":", 1)
        if key is None:
            self.seq[ws] = self.seq.get(ws, 0) + 1
            key = f"{self.seq[ws]:04d}"
        external_id = f"{CONVERSATION_PREFIX}{ws}-{key}"
        gaps = [timedelta(minutes=r.uniform(*gap_minutes)) for _ in turns]
        start = self._start(sum(gaps, timedelta()), days=days)
        messages: list[ingest.MessageIn] = []
        at = start
        for i, ((role, speaker, body), gap) in enumerate(zip(turns, gaps)):
            at += gap
            streaming = streaming_last and i == len(turns) - 1
            messages.append(ingest.MessageIn(
                external_id=f"{external_id}-m{i + 1}", role=role, body=body,
                speaker=speaker.ref() if speaker else None, created_at=at,
                state="streaming" if streaming else "finished"))
        # Some older threads came back to life in the last few days.
        if reactivate is None:
            reactivate = followup is not None and (self.now - start) > timedelta(days=20) and r.random() < 0.18
        if reactivate and followup:
            at = max(at, self.now - timedelta(days=r.uniform(0.1, 3)))
            for j, (role, speaker, body) in enumerate(followup):
                at += timedelta(minutes=r.uniform(*gap_minutes))
                messages.append(ingest.MessageIn(
                    external_id=f"{external_id}-f{j + 1}", role=role, body=body,
                    speaker=speaker.ref() if speaker else None, created_at=min(at, self.now)))
        line = ingest.ImportLine(
            workspace=ws, agent=agent, agent_name=AGENT_NAMES[agent],
            connector=ingest.ConnectorRef(type=ctype, name=cname), external_id=external_id, title=title,
            audience=audience, creator=creator.ref() if creator else None, created_at=start,
            messages=messages)
        self.lines.append((ws, line))
        return external_id

    def topic(self, ws: str, agent: str, connector: str, topics: list[Topic], *, creator: Person | None,
              audience: ingest.Audience | None, speakers: list[Person] | None = None,
              gap_minutes: tuple[float, float] = (0.5, 6), closers: list[tuple[str, str]] | None = None) -> str:
        r = self.rng
        t = r.choice(topics)
        speakers = speakers or ([creator] if creator else [])
        s = self.slots(speaker=creator.display_name.split()[0] if creator else "the team")

        def who(role: str) -> Person | None:
            return r.choice(speakers) if role == "user" and speakers else None

        turns = []
        for role, text in t.script:
            chosen = r.choice(text) if isinstance(text, tuple) else text
            turns.append((role, who(role), _fill(chosen, s)))
        if closers and r.random() < 0.75:
            thanks, welcome = r.choice(closers)
            turns += [("user", who("user"), thanks), ("assistant", None, welcome)]
        if t.summary:
            turns.append(("summary", None, _fill(t.summary, s)))
        followup = [(role, who(role), _fill(text, s)) for role, text in t.followup] if t.followup else None
        title = _fill(r.choice(t.titles), s)
        return self.add(ws, agent, connector, title=title, creator=creator, audience=audience, turns=turns,
                        gap_minutes=gap_minutes, followup=followup)


def _nth(day: int) -> str:
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _email(first: str, last: str) -> str:
    ascii_only = unicodedata.normalize("NFKD", f"{first}.{last}").encode("ascii", "ignore").decode()
    return ascii_only.lower().replace("'", "") + "@example.com"


def _members(*people: Person) -> ingest.Audience:
    return ingest.Audience(kind="members", readers=[p.external_id for p in people])


WORKSPACE_AUDIENCE = ingest.Audience(kind="workspace")

# External ids (after the prefix) of the conversations the demo points at.
ROSE_ROOM = "grand-hotel-rose-room"
DOUBLE_BOOKING = "grand-hotel-double-booking"
FRENCH = "grand-hotel-french-guest"
SURPRISE = "grand-hotel-surprise"
STREAMING = "grand-hotel-sintra"
ALICE_WEDDING = "grand-hotel-alice-wedding-block"
INCIDENT = "acme-inc-482913"
DB_MIGRATION_PLAN = "acme-orders-db-migration"
ACME_STREAMING = "acme-streaming"


def _special_conversations(c: _Composer) -> None:
    """Hand-written conversations the printed examples find again."""
    alice, bob, ines, marco = GH_STAFF["alice"], GH_STAFF["bob"], GH_STAFF["ines"], GH_STAFF["marco"]
    helen = Person("guest-1042", "Helen Whitfield", GH_WEB)
    jonas = Person("guest-2231", "Jonas Berg", GH_WEB)
    camille = Person("guest-3317", "Camille Durand", GH_WEB)

    # Every message of this thread that says "booking" also says "rose": `booking -rose` leaves it out.
    c.add("grand-hotel", "concierge", GH_WEB, key="rose-room", title="Private dinner for my mother's 80th",
          creator=helen, audience=None, days=41, gap_minutes=(2, 30), reactivate=True, turns=[
              ("user", helen, "Hello, I'd like a private room for dinner for 14 people on Saturday the 21st, "
                              "for my mother's 80th birthday. Somewhere quiet, she doesn't like noise."),
              ("assistant", None, "Happy birthday to your mother! The Rose Room would be ideal: it seats 16, "
                                  "looks onto the garden and has its own entrance from the lobby. Shall I hold it "
                                  "for 19:30?"),
              ("user", helen, "The Rose Room sounds perfect. Yes, 19:30 please."),
              ("tool", None, '{"tool": "events.hold", "room": "Rose Room", "date": "Saturday 21st", '
                             '"time": "19:30", "pax": 14, "status": "held"}'),
              ("assistant", None, "Your Rose Room booking is confirmed for Saturday at 19:30, 14 guests. The "
                                  "chef offers a tasting on Thursday at 17:00 to choose the menu."),
              ("user", helen, "Lovely. Could there be peonies on the table? They were her wedding flowers."),
              ("assistant", None, "Of course: peonies on the table and a small card at her place."),
          ], followup=[
              ("user", helen, "Two cousins are flying in after all. Can the Rose Room take 16 instead of 14?"),
              ("assistant", None, "Yes, the Rose Room seats 16; I've updated the booking and told the kitchen."),
          ])
    c.add("grand-hotel", "concierge", GH_SLACK, key="double-booking",
          title="Room 412: two reservations for the same night", creator=alice, audience=_members(alice),
          days=12, gap_minutes=(1, 8), turns=[
              ("user", alice, "We have a double booking on room 412 for the night of the 14th: Mr Berg through "
                              "Booking.com and Mrs Okonkwo direct. Both are arriving tonight."),
              ("tool", None, '{"tool": "pms.reservations", "room": "412", "night": "14th", '
                             '"reservations": ["BKG-88213 Berg", "DIR-20931 Okonkwo"]}'),
              ("assistant", None, "Confirmed: both reservations hold room 412. Mrs Okonkwo booked first. Room 418 "
                                  "is free, same view, and one category higher. I suggest moving Mr Berg there "
                                  "as an upgrade, with a note apologising for the mix-up."),
              ("user", alice, "Do it, and put a bottle of Vinho Verde in 418."),
              ("assistant", None, "Done. Mr Berg is in 418 with the upgrade and the wine; Mrs Okonkwo keeps 412. "
                                  "The channel manager had mapped both room types to 412, so I've reported it."),
              ("user", alice, "Great, double booking sorted out. Thank you!"),
              ("summary", None, "Double booking on room 412 (14th) sorted out: Mr Berg moved to 418 with an "
                                "upgrade and wine, Mrs Okonkwo kept 412; channel manager mapping reported."),
          ])
    c.add("grand-hotel", "concierge", GH_WEB, key="french-guest",
          title="Réservation d'une table et transfert depuis l'aéroport", creator=camille, audience=None,
          days=6, gap_minutes=(1, 10), turns=[
              ("user", camille, "Bonjour ! Nous arrivons vendredi à 18h40 par le vol AF1024. Pourriez-vous "
                                "organiser un transfert depuis l'aéroport pour deux personnes ?"),
              ("assistant", None, "Bonjour Madame Durand ! Avec plaisir : un chauffeur vous attendra à la sortie "
                                  "des arrivées avec une pancarte à votre nom. Le trajet coûte 45 €, facturé "
                                  "sur la chambre."),
              ("user", camille, "Merci ! Et serait-il possible de faire une réservation pour dîner samedi soir, "
                                "dans un restaurant avec du fado ?"),
              ("assistant", None, "Je vous propose la Tasca do Chico, dans le Bairro Alto : le fado commence "
                                  "vers 21h. J'ai fait la réservation pour deux à 20h30."),
              ("user", camille, "Parfait, merci beaucoup !"),
          ])
    # A colleague's DM with the events agent: Alice's token is narrowed to the concierge agent, so
    # she must not find it (nor read it by id); Bob, who reads every agent, does.
    c.add("grand-hotel", "events", GH_SLACK, key="surprise", title="Planning something for the 12th",
          creator=bob, audience=_members(bob), days=4, gap_minutes=(2, 15), turns=[
              ("user", bob, "Alice has been with the hotel ten years on the 12th. I want to throw her a surprise "
                            "party after the evening shift. Don't mention it in the front office channels!"),
              ("assistant", None, "What a nice idea. The Library is free on the 12th from 22:00; I can hold it "
                                  "under 'staff training' so it doesn't show on her calendar."),
              ("user", bob, "Perfect. Marco will do a cake, Inês is collecting for a gift."),
              ("assistant", None, "Held the Library from 22:00 under 'staff training'. Reminder set for the 10th "
                                  "to confirm numbers with Marco."),
          ])
    # Alice's own conversation with the events agent: her token is narrowed to the concierge, but
    # she still sees the conversations she started herself, whichever agent they are with.
    c.add("grand-hotel", "events", GH_SLACK, key="alice-wedding-block",
          title="Room block for the Okonkwo–Hale wedding", creator=alice, audience=_members(alice, bob),
          days=15, gap_minutes=(3, 40), turns=[
              ("user", alice, "Can you reserve a block of 20 rooms for the Okonkwo–Hale wedding guests, Friday "
                              "to Sunday? The reception is in the marquee on the Garden Terrace."),
              ("assistant", None, "Blocked 20 rooms at the group rate, released automatically 21 days before "
                                  "arrival if unclaimed. The marquee setup is on the events calendar."),
              ("user", bob, "I'll send the booking link to the couple."),
          ])
    # A reply still being written: it stays out of search until it is finished.
    c.add("grand-hotel", "concierge", GH_WEB, key="sintra", title="Day trip to Sintra tomorrow",
          creator=jonas, audience=None, days=0.01, gap_minutes=(0.2, 1), streaming_last=True, turns=[
              ("user", jonas, "We'd like to visit Sintra tomorrow. What's the best way to get there?"),
              ("assistant", None, "The train from Rossio takes 40 minutes; from Sintra station, bus 434 loops "
                                  "to the palaces. Inside the Pena Park there is also a funicular-style shuttle "
                                  "that saves the steep climb, and I'm checking tomorrow's"),
          ])
    # Private kitchen coordination that the concierge sees: a room with three members.
    c.add("grand-hotel", "concierge", GH_SLACK, key="kitchen-vip", title="VIP dinner allergies",
          creator=ines, audience=_members(ines, marco, alice), days=9, turns=[
              ("user", ines, "The Lindqvist family in the Tagus Suite has a severe sesame allergy, please "
                             "brief room service."),
              ("assistant", None, "Room service and the Atrium kitchen are briefed; their profile now carries "
                                  "the allergy."),
              ("user", marco, "Confirmed from the kitchen: no sesame oil on their orders."),
          ])

    ravi, lee, dana, tom = ACME_STAFF["ravi"], ACME_STAFF["lee"], ACME_STAFF["dana"], ACME_STAFF["tom"]
    c.add("acme", "sre", ACME_SLACK, key="inc-482913", title="INC-482913: checkout latency after the pool change",
          creator=ravi, audience=_members(ravi, lee, dana, tom), days=18, gap_minutes=(1, 12), turns=[
              ("user", ravi, "Opening INC-482913: checkout p99 latency went from 300 ms to 4 s at 14:02 UTC. "
                             "Paging on-call."),
              ("tool", None, '{"tool": "metrics.query", "expr": "histogram_quantile(0.99, checkout_latency)", '
                             '"before_ms": 310, "after_ms": 4120}'),
              ("assistant", None, "The jump lines up with the deploy that cut the database connection pool "
                                  "from 50 to 10 per pod. Checkout requests are queueing for connections."),
              ("user", lee, "Rolling back the pool size for INC-482913 now."),
              ("assistant", None, "p99 is back to 320 ms three minutes after the rollback. INC-482913 "
                                  "mitigated; customers saw slow checkouts for 23 minutes."),
              ("user", dana, "Support got 41 tickets about slow checkout during INC-482913; I'll link them."),
              ("summary", None, "INC-482913 postmortem: a connection pool cut from 50 to 10 per pod queued "
                                "checkout requests (p99 4 s for 23 minutes). Action items: load-test pool "
                                "changes, alert on pool wait time."),
          ])
    c.add("acme", "sre", ACME_SLACK, key="orders-db-migration", title="Orders database migration to PostgreSQL 18",
          creator=ravi, audience=_members(ravi), days=33, gap_minutes=(3, 30), reactivate=True, turns=[
              ("user", ravi, "Let's plan the orders database migration from PostgreSQL 13 to 18. 600 GB, "
                             "and we can't afford more than 5 minutes of write downtime."),
              ("assistant", None, "Logical replication fits: set up the new cluster, replicate, and cut over "
                                  "with a short write freeze. The main risks are tables without primary keys "
                                  "and sequences, which logical replication does not carry."),
              ("user", ravi, "Write down the migration plan with a rollback."),
              ("assistant", None, "Plan: (1) schema-only restore on the new cluster; (2) publication and "
                                  "subscription; (3) wait for catch-up; (4) freeze writes, bump sequences, switch "
                                  "the connection secret; (5) smoke tests. Rollback: point the secret back; the "
                                  "old primary stays untouched for a week."),
          ], followup=[
              ("user", ravi, "Cutover for the orders database migration is booked for Sunday 06:00 UTC."),
              ("assistant", None, "Noted. I'll post the checklist in #ops on Saturday evening."),
          ])
    customer = Person("cust-7731", "Yusuf Demir", ACME_WEB)
    c.add("acme", "support", ACME_WEB, key="streaming", title="Bulk import failing on row 2,381",
          creator=customer, audience=None, days=0.02, gap_minutes=(0.2, 1), streaming_last=True, turns=[
              ("user", customer, "Our CSV import stops at row 2,381 with 'invalid date'."),
              ("assistant", None, "Row 2,381 has the date written as 31/04/2026, and April has only 30 days. "
                                  "Looking at the rest of the file for similar"),
          ])


def build_corpus(now: datetime | None = None) -> list[tuple[str, ingest.ImportLine]]:
    """The demo corpus as (workspace slug, import line) pairs; deterministic apart from timestamps."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(microsecond=0)
    c = _Composer(random.Random(SEED), now)
    r = c.rng
    _special_conversations(c)

    # grand-hotel: guests on the website with the concierge (each chat readable by its guest).
    guests = [Person(f"guest-{4000 + i}", f"{FIRST[i]} {LAST[(i * 7) % len(LAST)]}", GH_WEB) for i in range(30)]
    guests.append(Person("guest-4999", "Sam Taylor", GH_WEB))  # a guest who shares staff names, too
    for _ in range(140):
        g = r.choice(guests)
        c.topic("grand-hotel", "concierge", GH_WEB, CONCIERGE_GUEST, creator=g, audience=None, closers=GUEST_CLOSERS)
    staff = list(GH_STAFF.values())
    front = [GH_STAFF[k] for k in ("alice", "sam_night", "ines", "priya", "sam_wine")]
    for _ in range(40):  # staff DMs with the concierge
        p = r.choice(front)
        c.topic("grand-hotel", "concierge", GH_SLACK, CONCIERGE_STAFF, creator=p, audience=_members(p),
                closers=STAFF_CLOSERS)
    leads = [GH_STAFF[k] for k in ("alice", "sam_night", "ines", "priya")]
    for _ in range(15):  # a private room of the front-office leads
        c.topic("grand-hotel", "concierge", GH_SLACK, FRONT_OFFICE_ROOM, creator=GH_STAFF["sam_night"],
                audience=_members(*leads), speakers=leads, gap_minutes=(2, 20))
    for _ in range(20):  # the #front-desk channel, for the whole workspace
        c.topic("grand-hotel", "concierge", GH_SLACK, FRONT_DESK_CHANNEL, creator=None,
                audience=WORKSPACE_AUDIENCE, speakers=staff, gap_minutes=(5, 60))
    clients = [Person(_email(FIRST[i], LAST[(i * 11) % len(LAST)]), f"{FIRST[i]} {LAST[(i * 11) % len(LAST)]}",
                      GH_EMAIL) for i in range(0, 30, 2)]
    for _ in range(50):  # clients enquiring by email with the events desk
        p = r.choice(clients)
        c.topic("grand-hotel", "events", GH_EMAIL, EVENTS_CLIENT, creator=p, audience=None, gap_minutes=(60, 600),
                closers=GUEST_CLOSERS[:2])
    planners = [GH_STAFF[k] for k in ("bob", "bob", "marco", "ines", "alice", "sam_wine")]
    for _ in range(40):  # staff DMs with the events agent (Alice's among them are hers to see)
        p = r.choice(planners)
        c.topic("grand-hotel", "events", GH_SLACK, EVENTS_STAFF, creator=p, audience=_members(p),
                closers=STAFF_CLOSERS)
    team = [GH_STAFF[k] for k in ("bob", "marco", "ines")]
    for _ in range(12):  # the events team's private room
        c.topic("grand-hotel", "events", GH_SLACK, EVENTS_ROOM, creator=GH_STAFF["bob"], audience=_members(*team),
                speakers=team, gap_minutes=(5, 45))

    # acme: customers in the help widget, engineers on Slack.
    customers = [Person(f"cust-{7000 + i * 37}", f"{FIRST[(i + 5) % 30]} {LAST[(i * 13) % 30]}", ACME_WEB)
                 for i in range(40)]
    for _ in range(100):
        p = r.choice(customers)
        c.topic("acme", "support", ACME_WEB, SUPPORT, creator=p, audience=None, closers=CUSTOMER_CLOSERS)
    support_staff = [ACME_STAFF["dana"], ACME_STAFF["mia"]]
    for _ in range(20):  # support engineers asking the support agent
        p = r.choice(support_staff)
        c.topic("acme", "support", ACME_SLACK, SUPPORT, creator=p, audience=_members(p))
    sres = [ACME_STAFF["ravi"], ACME_STAFF["lee"], ACME_STAFF["tom"]]
    for _ in range(35):
        p = r.choice(sres)
        c.topic("acme", "sre", ACME_SLACK, SRE_DM, creator=p, audience=_members(p), closers=STAFF_CLOSERS)
    for _ in range(10):
        p = r.choice(sres[:2])
        c.topic("acme", "sre", ACME_SLACK, DB_MIGRATION, creator=p, audience=_members(p), gap_minutes=(5, 60))
    responders = [ACME_STAFF[k] for k in ("ravi", "lee", "dana", "tom")]
    for _ in range(12):
        c.topic("acme", "sre", ACME_SLACK, INCIDENT_ROOM, creator=r.choice(responders),
                audience=_members(*responders), speakers=responders, gap_minutes=(1, 15))
    for _ in range(15):
        c.topic("acme", "sre", ACME_SLACK, OPS_CHANNEL, creator=r.choice(sres), audience=WORKSPACE_AUDIENCE,
                speakers=sres, gap_minutes=(10, 90))

    # northwind: planners on Slack, drivers by SMS.
    planners_nw = list(NW_STAFF.values())
    for _ in range(45):
        p = r.choice(planners_nw)
        c.topic("northwind", "dispatch", NW_SLACK, DISPATCH, creator=p, audience=_members(p),
                gap_minutes=(2, 40), closers=STAFF_CLOSERS)
    drivers = [Person(f"+3161{2000000 + i * 7919}", f"{FIRST[(i + 11) % 30]} (driver)", NW_SMS) for i in range(8)]
    for _ in range(25):
        p = r.choice(drivers)
        c.topic("northwind", "dispatch", NW_SMS, DRIVER_SMS, creator=p, audience=None, gap_minutes=(1, 5))
    return c.lines
