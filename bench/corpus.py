"""A synthetic, deterministic corpus for the session-search benchmark.

Chat-like text over a Zipfian vocabulary (real high-frequency English, domain words, a few
thousand pronounceable jargon words; some conversations in French or German), rare
identifiers (incident and order numbers, names, e-mail addresses, paths), skewed workspaces
and agents (workspace and agent sizes follow Zipf's law, as real tenants do), conversations
with titles, creators and audiences, and user / assistant / tool / summary / system messages,
a few of them still streaming.

It is written straight into the tables with COPY, not through the ingest API, so 300,000
messages load in about 35 s on 2 cores. The triggers on the tables still fire on COPY: the search
sidecar (message_search) is filled and last_active_at is kept exactly as on the ingest path.

Planted for the benchmark (see ``RARE_TERM`` and friends):
- a rare word and a rare identifier, each in a handful of messages of every benchmark scope
  and a few outside them;
- a common word in about a quarter of all messages;
- a title phrase in about 0.4% of titles (and in one message of half of those conversations).

With a ``Disclosure`` (``load(conn, spec, disclosure=Disclosure())``, for the history-search
benchmark) the same skeleton and text get realistic audiences (DMs, private rooms, workspace and
public channels, a few external), source evidence for ~97% of messages, replies carrying
provenance (history message ids, memory ids), memories and identity links. The layer draws from
generators of its own: without it the corpus is exactly the session benchmark's.

Same ``Spec`` (seed included), same corpus, byte for byte.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

import psycopg

RARE_TERM = "kestrelbrook"
RARE_IDENTIFIER = "INC-482913"
COMMON_TERM = "invoice"
# The stemming configuration of each generated language (migration 0022's messages.language).
STEMMERS = {"en": "english", "fr": "french", "de": "german"}
TITLE_QUERY = "rose room"
TITLE_PHRASE = "Rose Room"
# Words that must come out of the generator only where they are planted.
RESERVED = ("kestrel", "invoice", "rose", "482913")

# The benchmark's reader: an ordinary active person of the first workspace (the sixth most
# active creator there), not its busiest.
READER_RANK = 5

# The corpus ends here (fixed, so a seed gives the same timestamps on any day).
T_END = datetime(2026, 6, 1, tzinfo=timezone.utc)
SPAN = timedelta(days=365)

WORKSPACES = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell", "cyberdyne",
              "soylent", "wonka", "oscorp", "aperture", "massive", "vandelay", "prestige"]
AGENTS = ["support", "sales", "ops", "billing", "concierge", "research", "people", "helpdesk", "legal",
          "events", "marketing", "security", "finance", "travel", "onboarding", "facilities"]

ENGLISH_TOP = """the i to you and a it is of that for in we can on this be have with do not what my are so if
me your just will at but no as there it's get know how about out like all up or was one don't need
should from time would please thanks ok yes now then when here they them see check could also any more
some did send make sure let our has had by an been still which were who go going think want sorry
today tomorrow again back only new other into over after before well right thing something because
does way look work got take use last first next same good great help find update said us its than
two three few many much very really already still soon week day morning afternoon call team hi hello
done fine ready able""".split()

ENGLISH_DOMAIN = """booking meeting calendar refund order customer ticket deploy server database migration
account password login email report budget contract supplier shipment delivery schedule weekend friday
monday tuesday wednesday thursday room venue catering quote payment card bank transfer receipt tax
vat discount price plan subscription renewal trial upgrade downgrade cancel cancellation policy access
permission role admin dashboard export import csv spreadsheet file folder drive link document draft
review approval sign signature legal clause liability warranty vendor onboarding offboarding laptop
monitor printer vpn wifi network outage incident alert pager escalation priority severity status
resolved pending blocked waiting owner assignee sprint backlog release version rollback hotfix branch
merge pull request build pipeline test staging production cluster node pod container image registry
latency error timeout retry queue worker cron job backup restore snapshot storage bucket region cost
usage quota limit invoice_placeholder lead prospect demo proposal pipeline forecast quarter target
revenue margin churn campaign newsletter webinar survey feedback nps segment audience launch
announcement press partner reseller travel flight hotel train visa expense reimbursement per diem
offsite agenda slides notes minutes action items follow-up deadline milestone roadmap feature bug
issue crash log stack trace config setting flag toggle api endpoint token key secret certificate
domain dns ssl sso mfa audit compliance gdpr retention consent privacy request data analytics metric
kpi chart query index table column schema""".split()
ENGLISH_DOMAIN = [w for w in ENGLISH_DOMAIN if w != "invoice_placeholder"]

FRENCH = """le la les de des un une et est pas je vous nous il elle que qui pour avec dans sur ce cette
mais merci bonjour oui non très bien faire avoir être au aux du en plus peut demain semaine client
commande facture réunion salle livraison rendez-vous problème compte mot passe paiement remboursement
devis contrat équipe projet mise jour serveur base données fichier lien envoyer reçu besoin aide
question réponse avant après toujours encore déjà aujourd'hui hier vendredi lundi réservation prix
tarif abonnement accès""".split()

GERMAN = """der die das und ist nicht ich sie wir es zu mit auf für von den dem ein eine bitte danke ja
nein heute morgen woche rechnung bestellung kunde termin raum lieferung problem konto passwort zahlung
erstattung angebot vertrag team projekt aktualisierung server datenbank datei link senden erhalten
brauche hilfe frage antwort vorher nachher immer noch schon gestern freitag montag buchung preis
abonnement zugang besprechung kalender""".split()

FIRST_NAMES = """Amara Ben Chen Dana Elif Farid Greta Hiro Ines Jonas Kemi Lars Mina Noor Omar Priya Quinn
Rafael Sanna Tomas Uma Viktor Wen Xavier Yara Zofia Aiko Bruno Chiara Dmitri Esme Felix Gita Hamid Ilse
Joao Kira Luca Maya Nils Olga Pavel Rana Sven Talia Ugo Vera Willem Yusuf Zeynep Anouk Bastien Camille
Dieter Emma Fabien Heike Jules Klaus Léa Manon Nadia Oskar Pauline Renate Solène Theo""".split()
LAST_NAMES = """Okafor Lindqvist Wang Moreau Yilmaz Haddad Schmidt Tanaka Garcia Berg Adeyemi Nielsen
Rahman Kowalski Petrov Novak Rossi Dubois Fischer Costa Ivanova Jansen Kaur Larsen Mendes Nakamura
Oliveira Popescu Quispe Richter Santos Takahashi Usman Vargas Weber Xu Yamamoto Zimmermann Bauer
Lefebvre Müller Fontaine Keller Girard Hoffmann Laurent Schneider Vogel""".split()
CITIES = "Lisbon Berlin Lyon Oslo Nairobi Osaka Toronto Austin Dublin Zurich Porto Kyoto".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday".split()

ROSE_TITLES = ["Rose Room double booking", "Rose Room AV setup", "Catering for the Rose Room",
               "Rose Room availability on {day}", "Moving the offsite to the Rose Room",
               "Rose Room projector not working", "Hold the Rose Room for {name}"]
ROSE_BODIES = ["Is the Rose Room free on {day} afternoon?", "I booked the Rose Room for {name} at 14:00.",
               "The Rose Room is double booked on {day}, can you move one of them?"]


def _zipf_weights(n: int, s: float, q: float = 0.0) -> list[float]:
    raw = [1.0 / (k + 1 + q) ** s for k in range(n)]
    total = sum(raw)
    return [w / total for w in raw]


def _cumulative(weights: list[float]) -> list[float]:
    out, acc = [], 0.0
    for w in weights:
        acc += w
        out.append(acc)
    return out


def _pseudo_words(rng: random.Random, count: int, taken: set[str]) -> list[str]:
    """Pronounceable jargon, typos and product names: the long tail of a real vocabulary."""
    onsets = ["b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
              "br", "cr", "dr", "fl", "gr", "kl", "pr", "sk", "sl", "sp", "st", "tr", "ch", "sh", "th"]
    nuclei = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"]
    codas = ["", "", "", "", "n", "r", "l", "s", "t", "x", "m", "nd", "rk"]
    out: list[str] = []
    seen = set(taken)
    while len(out) < count:
        syllables = rng.choice((1, 2, 2, 2, 3))
        word = "".join(rng.choice(onsets) + rng.choice(nuclei) + rng.choice(codas) for _ in range(syllables))
        if word in seen or any(r in word for r in RESERVED):
            continue
        seen.add(word)
        out.append(word)
    return out


@dataclass(frozen=True)
class Vocabulary:
    words: list[str]
    cum: list[float]

    def draw(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum, k=k)


def build_vocabularies(seed: int, size: int) -> dict[str, Vocabulary]:
    rng = random.Random(f"{seed}/vocabulary")
    domain = ENGLISH_DOMAIN[:]
    rng.shuffle(domain)
    real = ENGLISH_TOP + [w for w in domain if w not in ENGLISH_TOP]
    words = real + _pseudo_words(rng, max(0, size - len(real)), set(real))
    english = Vocabulary(words, _cumulative(_zipf_weights(len(words), 1.2, 2.7)))
    # French and German: their own Zipfian list, with some English (and jargon) mixed in.
    out = {"en": english}
    for lang, own in (("fr", FRENCH), ("de", GERMAN)):
        mixed = own + words[40:400]
        out[lang] = Vocabulary(mixed, _cumulative(_zipf_weights(len(mixed), 1.0, 2.0)))
    return out


@dataclass(frozen=True)
class Spec:
    messages: int = 300_000
    workspaces: int = 10
    agents_per_workspace: int = 10
    seed: int = 1
    vocabulary: int = 4_000
    workspace_skew: float = 1.0   # Zipf exponent of workspace sizes
    agent_skew: float = 1.0       # Zipf exponent of agent sizes within a workspace
    common_share: float = 0.25    # share of messages that contain COMMON_TERM
    title_share: float = 0.004    # share of conversations whose title contains TITLE_PHRASE
    reader_share: float = 0.015   # extra share of the first workspace's conversations the reader starts

    def __post_init__(self):
        if not 1 <= self.workspaces <= len(WORKSPACES):
            raise ValueError(f"workspaces must be 1..{len(WORKSPACES)}")
        if not 1 <= self.agents_per_workspace <= len(AGENTS):
            raise ValueError(f"agents_per_workspace must be 1..{len(AGENTS)}")
        if self.messages < 100:
            raise ValueError("messages must be at least 100")


@dataclass
class Corpus:
    """What was loaded: ids the benchmark needs to build its readers, and the counts."""
    spec: Spec
    workspace_ids: list[int]                # by size rank: [0] is the largest workspace
    workspace_slugs: list[str]
    agent_ids: list[list[int]]              # agent_ids[w][r]: workspace w's agent of size rank r
    reader_actor_id: int                    # a person in workspace 0 who started some conversations
    conversations: int = 0
    messages: int = 0
    planted: dict[str, int] = field(default_factory=dict)
    disclosure: dict = field(default_factory=dict)   # what the disclosure layer made (counts, shares)


@dataclass
class _Conversation:
    id: int
    ws: int
    agent: int          # global agent index: ws * agents_per_workspace + rank
    rank: int
    connector: int
    creator: int | None
    created_at: datetime
    lang: str
    title: str
    audience: tuple[str, str, list[str]]
    roles: list[str]
    streaming_last: bool
    rose: bool


def _length(rng: random.Random) -> int:
    """Messages in a conversation: mostly short, a long tail (mean about 4.4)."""
    x = rng.random()
    if x < 0.50:
        return rng.randint(1, 2)
    if x < 0.82:
        return rng.randint(3, 6)
    if x < 0.98:
        return rng.randint(7, 15)
    return int(math.exp(rng.uniform(math.log(16), math.log(40))))


def _roles(rng: random.Random, n: int) -> list[str]:
    roles: list[str] = []
    if n >= 4 and rng.random() < 0.03:
        roles.append("system")
    speaker = "user"
    while len(roles) < n:
        if speaker == "assistant" and len(roles) + 1 < n and rng.random() < 0.18:
            roles.append("tool")
            continue
        if len(roles) >= 10 and rng.random() < 0.04:
            roles.append("summary")
            continue
        roles.append(speaker)
        speaker = "assistant" if speaker == "user" else "user"
    return roles[:n]


class _Text:
    """Bodies and titles, drawn from the vocabularies with one seeded generator."""

    def __init__(self, seed: int, vocabularies: dict[str, Vocabulary], ws_slugs: list[str]):
        self.rng = random.Random(f"{seed}/text")
        self.vocab = vocabularies
        self.ws_slugs = ws_slugs
        pool = random.Random(f"{seed}/identifiers")
        self.incidents = [n for n in pool.sample(range(100_000, 1_000_000), 6_000) if n != 482913]
        self.orders = pool.sample(range(10_000, 100_000), 20_000)

    def name(self) -> str:
        return f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"

    def identifier(self, ws: int) -> str:
        r, x = self.rng, self.rng.random()
        if x < 0.25:
            return f"INC-{r.choice(self.incidents)}"
        if x < 0.45:
            return f"ORD-2026-{r.choice(self.orders)}"
        if x < 0.60:
            return self.name()
        if x < 0.68:
            first, last = r.choice(FIRST_NAMES), r.choice(LAST_NAMES)
            return f"{first}.{last}@{self.ws_slugs[ws]}.example".lower()
        if x < 0.75:
            w = self.vocab["en"].draw(r, 2)
            return f"src/{w[0]}/{w[1]}.py"
        if x < 0.80:
            return f"https://{self.ws_slugs[ws]}.example/{r.choice(ENGLISH_DOMAIN)}/{r.randint(1, 99999)}"
        if x < 0.88:
            return r.choice(["€", "$", "£"]) + f"{r.randint(5, 25000):,}" + r.choice(["", ".00", ".50"])
        if x < 0.94:
            return f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
        return f"v{r.randint(1, 9)}.{r.randint(0, 30)}.{r.randint(0, 12)}"

    def sentence(self, lang: str, ws: int, lo: int, hi: int) -> list[str]:
        r = self.rng
        words = self.vocab[lang].draw(r, r.randint(lo, hi))
        if r.random() < 0.12:
            words.insert(r.randrange(len(words) + 1), self.identifier(ws))
        return words

    def body(self, role: str, lang: str, ws: int, agent_slug: str, plants: list[str]) -> str:
        r = self.rng
        if role == "system":
            return (f"You are the {agent_slug} assistant for {self.ws_slugs[ws].title()}. "
                    "Answer briefly, cite order and incident numbers exactly, and never share "
                    "another customer's data.")
        if role == "tool":
            tool = r.choice(["search_orders", "lookup_incident", "calendar.find_slot", "crm.get_contact",
                             "billing.list_payments", "kb.search"])
            fields = {"status": r.choice(["ok", "ok", "ok", "not_found", "error"]),
                      "ref": self.identifier(ws), "rows": r.randint(0, 40)}
            note = " ".join(self.vocab["en"].draw(r, r.randint(3, 12)))
            text = (f'{{"tool": "{tool}", "status": "{fields["status"]}", "ref": "{fields["ref"]}", '
                    f'"rows": {fields["rows"]}, "note": "{note}"}}')
            return _plant_into_text(r, text, plants)
        if role == "summary":
            count, lo, hi = r.randint(2, 4), 8, 20
        elif role == "user":
            count, lo, hi = (1 if r.random() < 0.6 else r.randint(2, 3)), 3, 18
        else:  # assistant
            count, lo, hi = r.randint(1, 6), 6, 24
        sentences = [self.sentence(lang, ws, lo, hi) for _ in range(count)]
        for word in plants:
            s = sentences[r.randrange(len(sentences))]
            s.insert(r.randrange(len(s) + 1), word)
        parts = []
        for s in sentences:
            text = " ".join(s)
            end = "?" if (role == "user" and r.random() < 0.35) else r.choice(".....!")
            parts.append(text[:1].upper() + text[1:] + end)
        if role == "assistant" and r.random() < 0.15:
            items = [" ".join(self.vocab[lang].draw(r, r.randint(2, 7))) for _ in range(r.randint(2, 4))]
            parts.append("\n" + "\n".join(f"- {i}" for i in items))
        text = " ".join(parts)
        if role == "summary":
            text = "Summary so far: " + text
        return text

    def title(self, lang: str, ws: int) -> str:
        r = self.rng
        x = r.random()
        if x < 0.05:
            return ""
        if lang != "en" and x < 0.5:
            w = self.vocab[lang].draw(r, r.randint(2, 4))
            return " ".join(w)[:1].upper() + " ".join(w)[1:]
        d = ENGLISH_DOMAIN
        forms = [
            lambda: f"{r.choice(d).title()} {r.choice(d)}",
            lambda: f"{r.choice(d).title()} {r.choice(d)} {r.choice(d)}",
            lambda: f"{r.choice(d).title()} for {self.name()}",
            lambda: f"Question about {r.choice(d)} {r.choice(d)}",
            lambda: f"INC-{r.choice(self.incidents)}: {r.choice(d)} {r.choice(d)}",
            lambda: f"Order ORD-2026-{r.choice(self.orders)} {r.choice(d)}",
            lambda: f"{r.choice(d).title()} {r.choice(d)} in {r.choice(CITIES)}",
            lambda: f"Re: {r.choice(d)} {r.choice(d)}",
            lambda: " ".join(self.vocab["en"].draw(r, r.randint(3, 6))).capitalize(),
        ]
        return r.choice(forms)()

    def rose(self, template_list: list[str]) -> str:
        return self.rng.choice(template_list).format(day=self.rng.choice(DAYS), name=self.name())


def _plant_into_text(rng: random.Random, text: str, plants: list[str]) -> str:
    for word in plants:
        text = text[:-1] + f', "see": "{word}"}}'
    return text


class _Plan:
    """The skeleton: who talks to which agent, when, how many messages of which role.
    Bodies are drawn afterwards while streaming into COPY, so memory stays small."""

    def __init__(self, spec: Spec):
        self.spec = spec
        rng = random.Random(f"{spec.seed}/skeleton")
        n_ws, n_ag = spec.workspaces, spec.agents_per_workspace
        self.ws_weights = _zipf_weights(n_ws, spec.workspace_skew)
        self.agent_weights = _zipf_weights(n_ag, spec.agent_skew)
        self.ws_slugs = WORKSPACES[:n_ws]
        # People (slack) and visitors (web) per workspace, more in larger workspaces.
        self.people = [max(15, round(1500 * w)) for w in self.ws_weights]
        self.visitors = [max(20, round(1000 * w)) for w in self.ws_weights]
        self.actor_rows: list[tuple] = []
        self.person_ids: list[list[int]] = []
        self.visitor_ids: list[list[int]] = []
        self.bot_ids: list[int] = []
        names = random.Random(f"{spec.seed}/people")
        next_id = 1
        for w, slug in enumerate(self.ws_slugs):
            persons, visitors = [], []
            for i in range(self.people[w]):
                ext = "U" + "".join(names.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(9))
                display = f"{names.choice(FIRST_NAMES)} {names.choice(LAST_NAMES)}"
                if w == 0 and i == READER_RANK:
                    ext, display = "U0READER00", "Maya Lindqvist"
                self.actor_rows.append((next_id, w, f"slack:{slug}", f"{ext}{i}", display, "person"))
                persons.append(next_id)
                next_id += 1
            for i in range(self.visitors[w]):
                self.actor_rows.append((next_id, w, f"web:{slug}", f"v-{names.getrandbits(48):012x}", "", "person"))
                visitors.append(next_id)
                next_id += 1
            self.person_ids.append(persons)
            self.visitor_ids.append(visitors)
            for r in range(n_ag):
                self.actor_rows.append((next_id, w, f"slack:{slug}", f"B{AGENTS[r].upper()}", AGENTS[r].title(), "agent"))
                self.bot_ids.append(next_id)
                next_id += 1
        self.reader = self.person_ids[0][READER_RANK]
        person_cum = {w: _cumulative(_zipf_weights(len(p), 0.8)) for w, p in enumerate(self.person_ids)}

        ws_cum = _cumulative(self.ws_weights)
        agent_cum = _cumulative(self.agent_weights)
        lang_by_ws = {w: ("fr" if w % 5 == 4 else "de" if w % 7 == 6 else "en") for w in range(n_ws)}
        self.conversations: list[_Conversation] = []
        total = 0
        cid = 0
        while total < spec.messages:
            cid += 1
            n = min(_length(rng), spec.messages - total)
            total += n
            w = rng.choices(range(n_ws), cum_weights=ws_cum)[0]
            rank = rng.choices(range(n_ag), cum_weights=agent_cum)[0]
            web = rng.random() < 0.25
            if web:
                creator = rng.choice(self.visitor_ids[w])
            elif w == 0 and rng.random() < spec.reader_share:
                creator = self.reader
            elif rng.random() < 0.9:
                creator = rng.choices(self.person_ids[w], cum_weights=person_cum[w])[0]
            else:
                creator = None
            ns = f"{'web' if web else 'slack'}:{self.ws_slugs[w]}"
            x = rng.random()
            if web:
                audience = ("public", ns, []) if x < 0.2 else ("members", ns, [self.actor_ext(creator)])
            elif x < 0.70 or creator is None:
                audience = ("workspace", ns, [])
            elif x < 0.95:
                readers = {self.actor_ext(creator)} | {self.actor_ext(rng.choice(self.person_ids[w]))
                                                       for _ in range(rng.randint(0, 3))}
                audience = ("members", ns, sorted(readers))
            else:
                audience = ("public", ns, [])
            lang = lang_by_ws[w] if rng.random() < 0.6 else "en"
            if lang == "en" and rng.random() < 0.06:
                lang = rng.choice(["fr", "de"])
            roles = _roles(rng, n)
            created = T_END - SPAN * rng.random()
            agent = w * n_ag + rank
            self.conversations.append(_Conversation(
                id=cid, ws=w, agent=agent, rank=rank, connector=2 * agent + (1 if web else 0) + 1,
                creator=creator, created_at=created, lang=lang, title="", audience=audience, roles=roles,
                streaming_last=(roles[-1] == "assistant" and rng.random() < 0.01),
                rose=rng.random() < spec.title_share))
        self.message_total = total

    def actor_ext(self, actor_id: int) -> str:
        return self.actor_rows[actor_id - 1][3]

    def plants(self) -> tuple[dict[tuple[int, int], list[str]], dict[str, int]]:
        """(conversation index, message index) -> words to plant; and how many of each."""
        spec = self.spec
        rng = random.Random(f"{spec.seed}/plants")
        n_ag = spec.agents_per_workspace
        searchable: dict[int, list[tuple[int, int]]] = {}
        reader_other: list[tuple[int, int]] = []
        for ci, c in enumerate(self.conversations):
            for mi, role in enumerate(c.roles):
                if role in ("user", "assistant") and not (c.streaming_last and mi == len(c.roles) - 1):
                    searchable.setdefault(c.agent, []).append((ci, mi))
                    if c.creator == self.reader and c.rank >= 2 and c.ws == 0:
                        reader_other.append((ci, mi))
        # Every agent of the first workspace: 4 in the two largest, 2 in the others; 3 more in
        # the reader's own conversations with other agents; 2 in the largest agent of every
        # other workspace (outside every benchmark scope).
        quota: list[tuple[list[tuple[int, int]], int]] = []
        for rank in range(n_ag):
            quota.append((searchable.get(rank, []), 4 if rank < 2 else 2))
        quota.append((reader_other, 3))
        for w in range(1, spec.workspaces):
            quota.append((searchable.get(w * n_ag, []), 2))
        out: dict[tuple[int, int], list[str]] = {}
        counts = {RARE_TERM: 0, RARE_IDENTIFIER: 0}
        for candidates, k in quota:
            for word in (RARE_TERM, RARE_IDENTIFIER):
                free = [p for p in candidates if word not in out.get(p, [])]
                for p in rng.sample(free, min(k, len(free))):
                    out.setdefault(p, []).append(word)
                    counts[word] += 1
        return out, counts


# ---------------------------------------------------------------------------------------------
# The disclosure layer (history search). Everything here draws from generators of its own, so a
# corpus loaded without it is byte for byte the session benchmark's.


@dataclass(frozen=True)
class Disclosure:
    """Audiences, source evidence and provenance for the history-search benchmark.

    Slack conversations with a creator get one of: a DM with the agent (members, the creator
    alone), a private room (members, the creator and 2-7 others), a workspace channel, a public
    channel, or (the rest) an external shared channel (the creator and 1-3 outside readers).
    Web conversations keep theirs (a visitor's DM, 20% public). Messages of a DM or private room
    are spoken by its readers.
    """
    dm: float = 0.40
    private_room: float = 0.15
    workspace: float = 0.30
    public: float = 0.12                       # external: 1 - the four above (0.03)
    room_readers: tuple[int, int] = (3, 8)
    # Unknown provenance: whole conversations of a legacy import, and a few single messages.
    no_evidence_conversations: float = 0.025
    no_evidence_messages: float = 0.005
    # Agent replies stored through a turn: history ids = the loaded window (the last 5-30 earlier
    # messages of the conversation, all of them in a shorter one) ...
    reply_provenance: float = 0.95
    window: tuple[int, int] = (5, 30)
    # ... plus, for some, what the turn's search_history returned: 1-3 hits of earlier
    # conversations of the same agent, each with up to two neighbours on either side.
    searched: float = 0.10
    # ... and, for some, 1-3 of the agent's memories.
    memory_use: float = 0.05
    memories_per_1000: float = 10.0            # memories formed per 1,000 messages of an agent
    # Share of searched messages and used memories whose audience does not (or no longer)
    # fit the reply's conversation: what the lineage walk exists to catch.
    stray: float = 0.10
    identity_links: int = 60                   # slack person <-> web visitor, agents of the first workspace
    revoked_links: float = 0.10


def _allows(origin: tuple[str, str, list[str]], dest: tuple[str, str, list[str]]) -> bool:
    """backscroll_audience_allows (sql/0004), without identity links."""
    o_kind, o_ns, o_readers = origin
    d_kind, d_ns, d_readers = dest
    if o_kind == "public":
        return True
    if o_kind == "workspace":
        return d_kind in ("workspace", "members") and d_ns == o_ns
    return d_kind == o_kind and d_ns == o_ns and set(d_readers) <= set(o_readers)


class _DisclosureLayer:
    """Redraws the plan's audiences, then answers, message by message while the corpus streams
    into COPY: who speaks in a members room, the provenance of a reply, whether there is source
    evidence. Memories and identity links are drawn up front."""

    def __init__(self, plan: "_Plan", d: Disclosure):
        self.plan, self.d = plan, d
        seed = plan.spec.seed
        rng = random.Random(f"{seed}/disclosure")
        self.rng = random.Random(f"{seed}/provenance")
        convs = plan.conversations
        self.readers: dict[int, list[int]] = {}   # conversation index -> reader actor ids (members rooms)
        for ci, c in enumerate(convs):
            kind, ns, _ = c.audience
            x = rng.random()  # one draw per conversation, whatever the branch
            if ns.startswith("web:"):
                if kind == "members":
                    self.readers[ci] = [c.creator]
                continue
            if c.creator is None:
                c.audience = ("workspace", ns, []) if x < 0.7 else ("public", ns, [])
                continue
            if x < d.dm:
                self.readers[ci] = [c.creator]
                c.audience = ("members", ns, [plan.actor_ext(c.creator)])
            elif x < d.dm + d.private_room:
                people = plan.person_ids[c.ws]
                want = min(len(people), rng.randint(*d.room_readers))
                ids = {c.creator}
                while len(ids) < want:
                    ids.add(rng.choice(people))
                self.readers[ci] = sorted(ids)
                c.audience = ("members", ns, sorted(plan.actor_ext(a) for a in ids))
            elif x < d.dm + d.private_room + d.workspace:
                c.audience = ("workspace", ns, [])
            elif x < d.dm + d.private_room + d.workspace + d.public:
                c.audience = ("public", ns, [])
            else:
                outside = [f"ext-{rng.getrandbits(40):010x}" for _ in range(rng.randint(1, 3))]
                c.audience = ("external", ns, sorted([plan.actor_ext(c.creator), *outside]))
        self.legacy = {ci for ci in range(len(convs)) if rng.random() < d.no_evidence_conversations}

        self.base: list[int] = []   # id of each conversation's first message
        next_id = 1
        for c in convs:
            self.base.append(next_id)
            next_id += len(c.roles)
        by_agent: dict[int, list[tuple[datetime, int]]] = {}
        for ci, c in enumerate(convs):
            by_agent.setdefault(c.agent, []).append((c.created_at, ci))
        self.by_agent = {a: sorted(v) for a, v in by_agent.items()}
        self.times = {a: [t for t, _ in v] for a, v in self.by_agent.items()}

        # Memories: formed in a conversation of the agent, with its audience, from 1-4 of its messages.
        self.memory_rows: list[tuple] = []
        self.memories: dict[int, list[tuple[datetime, int, tuple]]] = {}
        mrng = random.Random(f"{seed}/memories")
        memory_id = 0
        for agent, items in sorted(self.by_agent.items()):
            size = sum(len(convs[ci].roles) for _, ci in items)
            for _ in range(max(2, round(size * d.memories_per_1000 / 1000))):
                ci = mrng.choice(items)[1]
                c = convs[ci]
                said = [mi for mi, role in enumerate(c.roles) if role in ("user", "assistant")] or [0]
                sources = sorted(self.base[ci] + mi for mi in mrng.sample(said, min(len(said), mrng.randint(1, 4))))
                created = c.created_at + timedelta(hours=mrng.uniform(1, 48))
                memory_id += 1
                body = "Remembered: " + " ".join(mrng.choice(ENGLISH_DOMAIN) for _ in range(mrng.randint(4, 12)))
                self.memory_rows.append((memory_id, c.ws + 1, agent + 1, body, c.audience[0], c.audience[1],
                                         c.audience[2], sources, created))
                self.memories.setdefault(agent, []).append((created, memory_id, c.audience))
        for v in self.memories.values():
            v.sort()
        self.memory_times = {a: [t for t, _, _ in v] for a, v in self.memories.items()}

        # Identity links: active slack people of the first workspace proved to be web visitors,
        # per agent (more for the busiest); the benchmark's reader always, for the busiest agent.
        lrng = random.Random(f"{seed}/links")
        n_ag = plan.spec.agents_per_workspace
        shares = [0.4, 0.2] + [0.4 / max(1, n_ag - 2)] * (n_ag - 2)
        people, visitors = plan.person_ids[0], plan.visitor_ids[0]
        cum = _cumulative(_zipf_weights(len(people), 0.8))
        self.link_rows: list[tuple] = []
        for rank in range(n_ag):
            pairs: set[tuple[int, int]] = {(plan.reader, visitors[0])} if rank == 0 else set()
            want = max(1, round(d.identity_links * shares[rank]))
            while len(pairs) < min(want, len(visitors)):
                pairs.add((lrng.choices(people, cum_weights=cum)[0], lrng.choice(visitors)))
            for a, b in sorted(pairs):
                revoked = T_END - timedelta(days=lrng.uniform(1, 60)) if (
                    lrng.random() < d.revoked_links and a != plan.reader) else None
                self.link_rows.append((rank + 1, a, b, f"verified:{lrng.getrandbits(32):08x}",
                                       T_END - SPAN + SPAN * lrng.random() * 0.5, revoked))

        self.evidence_rows: list[tuple] = []
        self.stats = {"replies": 0, "replies_with_history": 0, "history_ids": 0, "searched_replies": 0,
                      "searched_ids": 0, "stray_searched_ids": 0, "replies_with_memories": 0, "memory_refs": 0,
                      "stray_memory_refs": 0}

    def speaker(self, ci: int, drawn: int | None) -> int | None:
        """In a DM or private room, only its readers speak."""
        readers = self.readers.get(ci)
        if readers is None or drawn in readers:
            return drawn
        return readers[0] if len(readers) == 1 else self.rng.choice(readers)

    def evidence(self, ci: int, mid: int, role: str, at: datetime) -> None:
        if ci in self.legacy or self.rng.random() < self.d.no_evidence_messages:
            return
        kind = "agent_reply" if role == "assistant" else "connector_event" if role == "user" else "ingest"
        self.evidence_rows.append((mid, kind, None, at))

    def _searched(self, ci: int) -> list[int]:
        """What one search returned into conversation `ci`: a hit of an earlier conversation of
        the same agent, with up to two neighbours on either side."""
        convs = self.plan.conversations
        c = convs[ci]
        times, items = self.times[c.agent], self.by_agent[c.agent]
        earlier = bisect.bisect_left(times, c.created_at)
        if earlier == 0:
            return []
        stray = self.rng.random() < self.d.stray
        for _ in range(20):
            cj = items[self.rng.randrange(earlier)][1]
            if cj == ci:
                continue
            other = convs[cj]
            if stray or (cj not in self.legacy and _allows(other.audience, c.audience)):
                hit = self.rng.randrange(len(other.roles))
                ids = [self.base[cj] + j for j in range(max(0, hit - 2), min(len(other.roles), hit + 3))]
                if stray:
                    self.stats["stray_searched_ids"] += len(ids)
                return ids
        return []

    def _memories(self, ci: int) -> list[int]:
        c = self.plan.conversations[ci]
        items = self.memories.get(c.agent, [])
        earlier = bisect.bisect_left(self.memory_times.get(c.agent, []), c.created_at)
        out: set[int] = set()
        for _ in range(self.rng.randint(1, 3)):
            stray = self.rng.random() < self.d.stray
            for _ in range(20):
                if earlier == 0:
                    break
                _, memory_id, audience = items[self.rng.randrange(earlier)]
                if stray or _allows(audience, c.audience):
                    out.add(memory_id)
                    self.stats["stray_memory_refs"] += stray
                    break
        return sorted(out)

    def provenance(self, ci: int, mi: int, role: str) -> tuple[list[int], list[int]]:
        if role != "assistant":
            return [], []
        self.stats["replies"] += 1
        if ci in self.legacy or self.rng.random() >= self.d.reply_provenance:
            return [], []
        base = self.base[ci]
        ids = set(range(base + max(0, mi - self.rng.randint(*self.d.window)), base + mi))
        if self.rng.random() < self.d.searched:
            self.stats["searched_replies"] += 1
            for _ in range(self.rng.randint(1, 3)):
                found = self._searched(ci)
                self.stats["searched_ids"] += len(found)
                ids.update(found)
        memories: list[int] = []
        if self.rng.random() < self.d.memory_use:
            memories = self._memories(ci)
            self.stats["replies_with_memories"] += bool(memories)
            self.stats["memory_refs"] += len(memories)
        self.stats["replies_with_history"] += bool(ids)
        self.stats["history_ids"] += len(ids)
        return sorted(ids), memories

    def summary(self, messages: int) -> dict:
        convs = self.plan.conversations
        kinds: dict[str, int] = {}
        for ci, c in enumerate(convs):
            key = c.audience[0]
            if key == "members":
                key = "members: DM (1 reader)" if len(c.audience[2]) == 1 else "members: private room"
            kinds[key] = kinds.get(key, 0) + 1
        s = self.stats
        return {
            "conversation_audiences": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "messages_with_evidence": len(self.evidence_rows),
            "evidence_share": round(len(self.evidence_rows) / max(1, messages), 4),
            "legacy_conversations": len(self.legacy),
            **s,
            "mean_history_ids": round(s["history_ids"] / max(1, s["replies_with_history"]), 2),
            "memories": len(self.memory_rows),
            "identity_links": len(self.link_rows),
            "revoked_links": sum(1 for r in self.link_rows if r[5] is not None),
        }


def _copy(cur: psycopg.Cursor, table: str, columns: list[str], rows) -> int:
    statement = f"copy {table} ({', '.join(columns)}) from stdin"
    n = 0
    with cur.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def load(conn: psycopg.Connection, spec: Spec = Spec(), *, chunk: int = 50_000,
         disclosure: Disclosure | None = None, progress: Callable[[str], None] = lambda _: None) -> Corpus:
    """Write the corpus into an empty, migrated database.

    ``conn`` must be in autocommit mode: each table, and each chunk of messages, commits on its own.
    With ``disclosure``, the disclosure layer (audiences, source evidence, reply provenance,
    memories, identity links) is drawn over the same skeleton and text.
    """
    if not conn.autocommit:
        raise ValueError("load() needs an autocommit connection (each step commits on its own)")
    with conn.cursor() as cur:
        if cur.execute("select exists (select from workspaces)").fetchone()[0]:
            raise RuntimeError("the corpus loads into an empty database: workspaces is not empty")
    plan = _Plan(spec)
    n_ag = spec.agents_per_workspace
    plants, counts = plan.plants()
    layer = _DisclosureLayer(plan, disclosure) if disclosure is not None else None
    text = _Text(spec.seed, build_vocabularies(spec.seed, spec.vocabulary), plan.ws_slugs)
    timing = random.Random(f"{spec.seed}/timing")
    common = random.Random(f"{spec.seed}/common")

    for c in plan.conversations:
        c.title = text.rose(ROSE_TITLES) if c.rose else text.title(c.lang, c.ws)

    with conn.transaction(), conn.cursor() as cur:
        _copy(cur, "workspaces", ["id", "slug", "name", "ts_config"],
              ((w + 1, slug, slug.title(), "multilingual") for w, slug in enumerate(plan.ws_slugs)))
        _copy(cur, "agents", ["id", "workspace_id", "slug", "name", "created_at"],
              ((w * n_ag + r + 1, w + 1, AGENTS[r], AGENTS[r].title(), T_END - SPAN - timedelta(days=1))
               for w in range(spec.workspaces) for r in range(n_ag)))
        _copy(cur, "connectors", ["id", "agent_id", "type", "name"],
              ((2 * a + k + 1, a + 1, ("slack", "web")[k], plan.ws_slugs[a // n_ag])
               for a in range(spec.workspaces * n_ag) for k in (0, 1)))
        _copy(cur, "actors", ["id", "workspace_id", "namespace", "external_id", "display_name", "kind"],
              ((i, w + 1, ns, ext, disp, kind) for i, w, ns, ext, disp, kind in plan.actor_rows))
        _copy(cur, "conversations",
              ["id", "workspace_id", "agent_id", "connector_id", "external_id", "title", "audience_kind",
               "audience_namespace", "audience_readers", "creator_actor_id", "created_at", "updated_at"],
              ((c.id, c.ws + 1, c.agent + 1, c.connector, f"C{c.id:08X}", c.title, c.audience[0], c.audience[1],
                c.audience[2], c.creator, c.created_at, c.created_at) for c in plan.conversations))
    progress(f"{len(plan.conversations):,} conversations, {len(plan.actor_rows):,} actors")

    # Each message in its language, as the write path's detector would give it (the generator
    # knows it): under `multilingual`, the product's default, the documents hold its stems.
    columns = ["id", "conversation_id", "external_id", "speaker_actor_id", "role", "body", "state",
               "audience_kind", "audience_namespace", "audience_readers", "created_at", "updated_at", "language"]
    if layer is not None:
        columns += ["history_message_ids", "memory_ids"]

    def rows() -> Iterator[tuple]:
        mid = 0
        for ci, c in enumerate(plan.conversations):
            at = c.created_at + timedelta(seconds=timing.uniform(0, 60))
            others = plan.person_ids[c.ws]
            rose_msg = next((i for i, role in enumerate(c.roles) if role == "user"), None) \
                if c.rose and timing.random() < 0.5 else None
            for mi, role in enumerate(c.roles):
                mid += 1
                words = list(plants.get((ci, mi), ()))
                if role != "system" and common.random() < spec.common_share:
                    words.append(COMMON_TERM)
                body = text.body(role, c.lang, c.ws, AGENTS[c.rank], words)
                if mi == rose_msg:
                    body = text.rose(ROSE_BODIES) + " " + body
                state = "finished"
                if c.streaming_last and mi == len(c.roles) - 1:
                    state, body = "streaming", body[: max(1, len(body) // 2)]
                if role == "user":
                    speaker = c.creator if (c.creator and timing.random() < 0.85) else timing.choice(others)
                elif role == "assistant":
                    speaker = plan.bot_ids[c.agent]
                else:
                    speaker = None
                row = (mid, c.id, f"{int(at.timestamp())}.{mi:06d}", speaker, role, body, state,
                       c.audience[0], c.audience[1], c.audience[2], at, at, STEMMERS[c.lang])
                if layer is not None:
                    if role == "user":
                        row = row[:3] + (layer.speaker(ci, speaker),) + row[4:]
                    layer.evidence(ci, mid, role, at)
                    row += layer.provenance(ci, mi, role)
                yield row
                gap = timing.lognormvariate(math.log(40), 1.0)
                if timing.random() < 0.04:
                    gap += timing.uniform(3_600, 5 * 86_400)  # picked up again hours or days later
                at += timedelta(seconds=gap)

    it = rows()
    written = 0
    while True:
        with conn.transaction(), conn.cursor() as cur:
            n = _copy(cur, "messages", columns, (row for _, row in zip(range(chunk), it)))
        if n == 0:
            break
        written += n
        progress(f"{written:,} / {plan.message_total:,} messages")

    summary: dict = {}
    if layer is not None:
        with conn.transaction(), conn.cursor() as cur:
            _copy(cur, "message_source_evidence", ["message_id", "kind", "reference", "recorded_at"],
                  layer.evidence_rows)
            _copy(cur, "memories", ["id", "workspace_id", "agent_id", "body", "audience_kind", "audience_namespace",
                                    "audience_readers", "source_message_ids", "created_at"], layer.memory_rows)
            _copy(cur, "identity_links", ["agent_id", "actor_a", "actor_b", "proof", "verified_at", "revoked_at"],
                  layer.link_rows)
        summary = layer.summary(written)
        progress(f"{summary['messages_with_evidence']:,} evidence rows, {summary['memories']:,} memories, "
                 f"{summary['identity_links']} identity links")

    with conn.transaction(), conn.cursor() as cur:
        for table in ("workspaces", "agents", "connectors", "actors", "conversations", "messages") + (
                ("memories",) if layer is not None else ()):
            cur.execute(f"select setval(pg_get_serial_sequence('{table}', 'id'), (select max(id) from {table}))")

    return Corpus(
        spec=spec,
        workspace_ids=[w + 1 for w in range(spec.workspaces)],
        workspace_slugs=plan.ws_slugs,
        agent_ids=[[w * n_ag + r + 1 for r in range(n_ag)] for w in range(spec.workspaces)],
        reader_actor_id=plan.reader,
        conversations=len(plan.conversations),
        messages=written,
        planted={**counts, "title conversations": sum(c.rose for c in plan.conversations)},
        disclosure=summary,
    )


def describe(spec: Spec) -> Corpus:
    """The ids and counts ``load`` returns, without loading (for a database loaded earlier)."""
    plan = _Plan(spec)
    _, counts = plan.plants()
    n_ag = spec.agents_per_workspace
    return Corpus(
        spec=spec,
        workspace_ids=[w + 1 for w in range(spec.workspaces)],
        workspace_slugs=plan.ws_slugs,
        agent_ids=[[w * n_ag + r + 1 for r in range(n_ag)] for w in range(spec.workspaces)],
        reader_actor_id=plan.reader,
        conversations=len(plan.conversations),
        messages=plan.message_total,
        planted={**counts, "title conversations": sum(c.rose for c in plan.conversations)},
    )


if __name__ == "__main__":  # a look at a few generated conversations, no database needed
    import argparse

    ap = argparse.ArgumentParser(description="Print the first conversations of a generated corpus (no database).")
    ap.add_argument("messages", type=int, nargs="?", default=2_000, help="the corpus size (default 2000)")
    spec = Spec(messages=ap.parse_args().messages)
    plan = _Plan(spec)
    text = _Text(spec.seed, build_vocabularies(spec.seed, spec.vocabulary), plan.ws_slugs)
    for c in plan.conversations[:6]:
        print(f"== [{plan.ws_slugs[c.ws]}/{AGENTS[c.rank]}] {text.title(c.lang, c.ws)!r} ({c.lang})")
        for role in c.roles:
            print(f"  {role:9} {text.body(role, c.lang, c.ws, AGENTS[c.rank], [])[:160]}")
