"""The demo corpus as data: workspaces, people, channels, the conversation templates (a script is
a list of (role, text or alternatives); `{slot}` names are filled from the slots drawn for each
conversation) and the slot values."""

from __future__ import annotations

from dataclasses import dataclass


from .. import ingest


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
