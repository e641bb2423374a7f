"""A labelled evaluation set for session search: needles and the queries that should find them.

Each needle is one conversation about one concrete situation (names, rooms, ids, amounts), written
to stand out from the templated background of `backscroll/demo/corpus.py` (grand-hotel and acme). The
benchmark mixes the needles into that corpus and measures recall@10 and MRR of each query against
its target, for lexical, vector and hybrid search.

Query kinds:
- identifier: an exact id that occurs verbatim in the target (e.g. "PO-55817");
- name: a person, company or place name from the target, sometimes with one more word;
- keyword: 2-3 words a person would type, all occurring (as exact, case-insensitive tokens) in one
  and the same message of the target, since session search ANDs a query's words within a message;
- paraphrase: describes the situation in the needle's language with no word in common with its
  title or messages (apart from a, the, of, to, in, on, for, and, with, at);
- multilingual: a query in another language than the needle, sharing no word with it.

Pure data; `python3 bench/eval_set.py` checks the set's consistency.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Needle:
    key: str                 # unique, snake_case
    workspace: str           # "grand-hotel" or "acme"
    title: str               # a realistic conversation title (sometimes vague)
    language: str            # "en", "fr", "de", "es", "pt"
    messages: tuple[tuple[str, str], ...]   # (role "user"|"assistant", body), alternating


@dataclass(frozen=True)
class Query:
    text: str
    kind: str                # "identifier" | "name" | "keyword" | "paraphrase" | "multilingual"
    target: str              # a Needle.key
    note: str = ""           # why it is hard / what it tests


NEEDLES: tuple[Needle, ...] = (
    # ------------------------------------------------------------------ grand-hotel, English
    Needle("gh_bees_rooftop", "grand-hotel", "Bees at the rooftop pool", "en", (
        ("user", "A swarm of bees has settled under the big parasol next to the rooftop pool on the 9th "
                 "floor. Guests from 902 and 905 came down to reception. What do we do?"),
        ("assistant", "Keep people away and don't spray anything: a resting swarm is usually calm and moves "
                      "on within a day. I've closed the rooftop pool on the booking screen until 15:00 and "
                      "called the beekeeper on our supplier list, Fernando Albuquerque (Apicultura "
                      "Albuquerque). He can come at 12:30 and collects the swarm in a box, free of charge if "
                      "he keeps the bees."),
        ("user", "Good. Put a sign on the rooftop door and offer the family in 902 the spa pool instead."),
        ("assistant", "Done: a sign is on the rooftop door, and the family in 902 has two spa passes for this "
                      "afternoon. Work order WO-30377 is logged for the beekeeper's visit."),
    )),
    Needle("gh_linen_wrong_size", "grand-hotel", "Linen delivery short again", "en", (
        ("user", "Tejo Têxteis delivered PO-55817 this morning: we ordered 240 king duvet covers and got 240 "
                 "queen size. Second time this quarter, and Oksana needs them for the 7th floor "
                 "refurbishment on Monday."),
        ("assistant", "I've checked PO-55817: the order line says king, 260×240 cm, and their delivery note "
                      "DN-88410 says queen, 220×240. So the error is theirs. I can draft a complaint asking "
                      "for an exchange by Friday and a credit note for the courier costs."),
        ("user", "Yes, and mention that we'll look at other suppliers if it happens again."),
        ("assistant", "Draft ready for Tejo Têxteis: exchange of all 240 covers by Friday, a credit note of "
                      "€180 for courier costs, and a clear line that a third wrong delivery would make us "
                      "retender the linen contract. Oksana Hrytsenko is in copy."),
    )),
    Needle("gh_insulin_fridge", "grand-hotel", "Medical fridge for room 523", "en", (
        ("user", "Hi, I'm in room 523. I'm diabetic and the minibar isn't cold enough for my insulin pens: "
                 "the thermometer I carry shows 13 degrees. Is there a proper fridge?"),
        ("assistant", "Thank you for telling us, Mr Wieczorek. Engineering keeps a small medical refrigerator "
                      "that holds 2–8 °C; it will be in room 523 within 30 minutes. Until then the bar can "
                      "keep your pens in a sealed bag in its own fridge."),
        ("user", "That would be great, I have 4 pens and a spare box."),
        ("assistant", "The medical refrigerator is installed and set to 5 °C, and we switched off the minibar "
                      "so it doesn't warm that corner. There's no charge. If you need a sharps bin, "
                      "housekeeping will bring a yellow container."),
    )),
    Needle("gh_parrot", "grand-hotel", "Guest arrived with a parrot", "en", (
        ("user", "Mr Desmond Achterberg just checked into 311 with an African grey parrot called Kiwi in a "
                 "travel cage. We're a no-pets hotel except for assistance dogs. He says his travel agent "
                 "cleared it."),
        ("assistant", "His booking BKG-77402 has no pet note, and the agent's confirmation doesn't mention "
                      "one. Options: a pet-sitting service in Campo de Ourique boards birds from €25 a night, "
                      "or the cage stays in 311 tonight with a deep-clean fee of €90 and we sort it out "
                      "tomorrow."),
        ("user", "Tonight he keeps Kiwi, it's 1am. Tell housekeeping not to open the cage, and that the bird "
                 "whistles."),
        ("assistant", "Noted on the room: the parrot stays tonight, housekeeping must not open the cage, and "
                      "the €90 cleaning fee is added. I've booked a call with Mr Achterberg at 10:00 about the "
                      "pet-sitter."),
    )),
    Needle("gh_chandelier", "grand-hotel", "Restoring the Hall of Mirrors chandelier", "en", (
        ("user", "The big crystal chandelier in the Hall of Mirrors dropped two arms last night during the "
                 "gala cleanup. Nobody hurt. Who restores these?"),
        ("assistant", "The asset register lists it as an 1890s Bohemian chandelier with 48 candle arms, last "
                      "restored in 2009 by Cristais Veloso in Marinha Grande. I've asked them for a visit. "
                      "Nobody should stand under it until they've checked the anchor."),
        ("user", "They came back with quote QT-2026-118: €18,400 and ten working days, scaffolding included."),
        ("assistant", "Then the Hall of Mirrors is out from 3 to 14 March. Two events are affected: the "
                      "Saldanha law firm breakfast on the 5th and a book launch on the 12th. Both can move to "
                      "the Library, which seats 40; I've drafted notes to both clients."),
    )),
    Needle("gh_lift_entrapment", "grand-hotel", "Guest stuck in service lift B", "en", (
        ("user", "Urgent: Mrs Harriet Oyelaran-Price, 72, was stuck in service lift B between the 3rd and 4th "
                 "floor for 35 minutes. She took the wrong lift from the spa corridor. The fire brigade got "
                 "her out at 16:20."),
        ("assistant", "I'm glad she's out. I've logged it as a safety incident and called Schindler: ticket "
                      "SCH-884120, a technician is on the way and lift B is locked out until then. Shall I "
                      "ask the nurse on call to check on her?"),
        ("user", "Yes. She's understandably upset. What can we offer?"),
        ("assistant", "I suggest the duty manager visits with flowers, her two remaining nights are "
                      "complimentary (room 417, €620), and she gets a written account of what happened. I've "
                      "also asked engineering to put a staff-only card reader on the spa corridor door to "
                      "lift B."),
    )),
    Needle("gh_chargeback", "grand-hotel", "Chargeback on a stay from January", "en", (
        ("user", "We got a chargeback notice from the card acquirer: €1,870 disputed by Viktor Lindahl, "
                 "booking BKG-77310, room 604, 12–16 January. Reason code 'services not provided'. We have "
                 "10 days to respond."),
        ("assistant", "The PMS shows he checked in on the 12th at 15:42 and his key card opened 604 on all four "
                      "nights; the minibar and two dinners were charged to the room. I can assemble the "
                      "evidence pack: signed registration card, key card audit, folio and the restaurant "
                      "bills with his signature."),
        ("user", "Do it. Also check whether he wrote to us before disputing."),
        ("assistant", "He didn't: no emails or reviews under his address. The evidence pack is ready to upload "
                      "to the acquirer's portal, case CB-5530917."),
    )),
    Needle("gh_film_crew", "grand-hotel", "Filming request for the lobby", "en", (
        ("user", "A production company, Maré Alta Filmes, wants to shoot a scene for a streaming series in "
                 "our lobby on 9 April from 06:00 to 11:00. Their location manager is Tiago Ferraz-Nunes. Is "
                 "this doable?"),
        ("assistant", "It can work before the checkout rush if guests can still get through by the side door. "
                      "Usual terms: a location fee (I'd suggest €6,500 for five hours), their liability "
                      "insurance certificate, the municipal filming permit, and no guest faces on camera "
                      "without signed releases."),
        ("user", "He accepts €6,500 but wants to film the staircase too."),
        ("assistant", "The staircase is fine if the crew keeps one side clear for guests. I've drafted location "
                      "agreement LOC-0409 with the fee, the hours, the insurance and the staircase clause, for "
                      "Tiago's signature."),
    )),
    Needle("gh_bed_bugs", "grand-hotel", "Room 716 - guest found bites", "en", (
        ("user", "The guest in 716, Ms Ji-woo Park, sent photos of bites and a small insect on the mattress "
                 "seam. She's very upset."),
        ("assistant", "The photos are consistent with bed bugs. Move her now to a room on another floor (329 is "
                      "free), bag her clothes for the laundry at 60 °C at our cost, and take 716 out of "
                      "inventory. I've called Pragas Zero for an inspection today, job PZ-64408."),
        ("user", "The inspector confirmed bed bugs in 716 only; 714 and 718 are clear."),
        ("assistant", "Then Pragas Zero does a heat treatment in 716 tomorrow and re-checks the neighbours in 14 "
                      "days. For Ms Park: her stay is refunded in full and the laundry returns her clothes "
                      "tonight."),
    )),
    Needle("gh_fire_alarm_straightener", "grand-hotel", "3am fire alarm - what happened?", "en", (
        ("user", "Full evacuation last night at 03:10, about 340 guests out on the street for 25 minutes. "
                 "What set it off?"),
        ("assistant", "The panel log shows detector 2W-14 in the corridor outside room 219. The guest, Caoimhe "
                      "Fitzgerald, was using a hair straightener with the bathroom door open after a shower, "
                      "and the steam plus heat tripped the detector. The fire brigade confirmed a false alarm "
                      "at 03:31."),
        ("user", "Can we charge her for the callout?"),
        ("assistant", "The brigade doesn't bill us for a first false alarm this year, so there's nothing to pass "
                      "on. I'd rather send a short apology to all guests with a free coffee voucher, and ask "
                      "the installer whether 2W-14 should be a heat detector instead of a smoke detector."),
    )),
    Needle("gh_cashmere_laundry", "grand-hotel", "Sweater ruined by the laundry", "en", (
        ("user", "I sent a grey cashmere sweater to your laundry yesterday and it came back two sizes smaller. "
                 "It's Loro Piana and cost €1,150. Room 905, Ambrose Kettleworth."),
        ("assistant", "I'm very sorry, Mr Kettleworth. Laundry ticket LDY-4471 shows it was washed instead of "
                      "dry-cleaned: our mistake. I've asked the laundry manager to confirm, and we'll "
                      "compensate you."),
        ("user", "I'd like the full price, I have the receipt."),
        ("assistant", "Understood. Please send a photo of the receipt; the hotel will refund €1,150 to your card "
                      "within five working days, and the laundry charges for this stay are waived."),
    )),
    Needle("gh_rooftop_proposal", "grand-hotel", "Help me plan something on the rooftop", "en", (
        ("user", "I want to propose to my girlfriend Aanya on the rooftop at sunset on 18 May. Can you help? "
                 "She loves string music and pastel de nata. Rohan Mehta, arriving the 16th."),
        ("assistant", "With pleasure! Sunset on 18 May is around 20:40. I can reserve the north corner of the "
                      "rooftop from 20:15, book a string quartet (Quarteto Alfama, €450 for 30 minutes) and "
                      "have the pastry chef make a pastel de nata with a little chocolate heart."),
        ("user", "Perfect. Can I leave the ring with you so she doesn't find it?"),
        ("assistant", "Yes: bring it to the concierge desk, it goes into the safe under your name, and the "
                      "quartet's leader hands it to you at the first chorus. The rooftop is held as 'Mehta, "
                      "private event'."),
    )),
    Needle("gh_celebrity_alias", "grand-hotel", "Arrival under an alias tonight", "en", (
        ("user", "Marisol Quintero, the singer, arrives tonight for three nights in the Presidential Suite, "
                 "booked under the alias 'Ms Green'. There were photographers at the Rua do Alecrim side "
                 "entrance this afternoon."),
        ("assistant", "Then let's bring her car in through the garage and up the service lift to the 8th "
                      "floor, with two security guards. The alias is on the PMS; on the radio staff only use "
                      "'Ms Green'. Her profile is set to do-not-disclose, so the switchboard won't confirm "
                      "she's staying."),
        ("user", "Her manager also wants the suite's windows checked: someone with a long lens was seen on "
                 "the building across the street."),
        ("assistant", "Housekeeping will keep the blackout blinds down on the street side, and I've asked the "
                      "building opposite whether their roof is accessible. I'll brief the night team at "
                      "22:00."),
    )),
    Needle("gh_pool_chlorine", "grand-hotel", "Pool closed - chlorine too high", "en", (
        ("user", "Two children came out of the indoor pool with red, stinging eyes. The lifeguard measured "
                 "free chlorine at 6.8 mg/L, the limit is 3. What now?"),
        ("assistant", "Close the indoor pool now and rinse the children's eyes with fresh water; the first-aid "
                      "kit has eye wash. A reading that high usually means the dosing pump stuck open. I've "
                      "opened ticket AQ-1187 with AquaTec Lisboa for an emergency visit."),
        ("user", "AquaTec found the dosing pump relay failed. They replaced it and said we need 6 hours of "
                 "circulation."),
        ("assistant", "Then the indoor pool reopens tomorrow at 07:00 after a fresh test. I've sent both families "
                      "a note from the duty manager with an apology and a free afternoon at the kids' club."),
    )),
    Needle("gh_walkin_freezer", "grand-hotel", "Walk-in freezer failed overnight", "en", (
        ("user", "The walk-in freezer in the main kitchen died overnight and the alarm didn't call anyone. It's "
                 "at +4 °C this morning. Scallops, duck breasts, the ice cream base, all thawed."),
        ("assistant", "Food safety first: anything above -12 °C for more than a few hours has to go. From the "
                      "stock sheet that's about €4,300 of product. Please photograph everything before it is "
                      "thrown out, for the insurance."),
        ("user", "Photos done. FrioNorte says the compressor burnt out and the alarm's SIM card had expired."),
        ("assistant", "I've opened insurance claim CLM-2026-0087 with the photos, the stock sheet and FrioNorte's "
                      "report, and set a yearly reminder to renew the alarm SIM. Until the new compressor "
                      "arrives on Thursday, frozen goods go to the banqueting freezer."),
    )),
    Needle("gh_marathon_group", "grand-hotel", "Running club group for the marathon", "en", (
        ("user", "Hi, I'm organising the Dublin Harriers trip to the Lisbon Marathon on 11 October: 38 "
                 "runners, 21 rooms, 9 to 12 October. The race starts at 07:30 in Cascais, so we need a very "
                 "early breakfast. Siobhan Gallagher, club secretary."),
        ("assistant", "Great! I've set up group code GRP-DH-1011 for 21 rooms. On race day breakfast opens at "
                      "04:45 with porridge, bananas and bagels, and a coach to the Cascais start leaves at "
                      "05:30. We can add a bag drop and late checkout until 16:00 on the 12th."),
        ("user", "Could we have ice baths after the race? Our physio is asking."),
        ("assistant", "The spa can set up four ice tubs in the treatment area from 13:00 to 17:00 on race day, "
                      "at €15 per runner. I've added it to the group contract."),
    )),
    Needle("gh_deaf_guest_kit", "grand-hotel", "Visual alarm kit for room 302", "en", (
        ("user", "Ólafur Sigurðsson arrives tomorrow; he's deaf and asked for a room with a visual fire alarm. "
                 "What do we have?"),
        ("assistant", "We have two accessibility kits: a flashing-light door knocker, a strobe linked to the "
                      "fire panel and a vibrating pad for under the pillow. Room 302 is already wired for the "
                      "strobe; I've reserved it and asked engineering to test the kit before 14:00."),
        ("user", "He'll also communicate by text, not phone."),
        ("assistant", "Noted on his profile: contact by SMS or chat only, and the front desk writes rather than "
                      "calls. The evacuation plan now lists room 302 for a personal knock by the fire warden."),
    )),
    # ------------------------------------------------------------------ acme, English
    Needle("acme_dkim_spam", "acme", "INC-731942: password reset emails going to spam", "en", (
        ("user", "Opening INC-731942: customers say password reset emails never arrive. Gmail has been putting "
                 "them in spam or rejecting them since about 09:10 UTC."),
        ("assistant", "The DMARC reports show DKIM failing for mail.acme.example since 09:04. That matches "
                      "yesterday's key rotation: the new selector s2026 was published in DNS with the public "
                      "key truncated at 255 characters, so every signature fails."),
        ("user", "Fix the TXT record then."),
        ("assistant", "The record is now split into two strings and validates; reset emails are landing in "
                      "inboxes again since 10:02. INC-731942 mitigated. I'd add a DKIM check to the rotation "
                      "runbook."),
    )),
    Needle("acme_double_charge", "acme", "Charged twice for INV-2026-0419", "en", (
        ("user", "Hi, our card was charged twice for invoice INV-2026-0419, $4,800 each, on 3 March. Can you "
                 "refund one? Penelope Hargreaves, Brightwater Dental."),
        ("assistant", "I'm sorry about that. I see two successful payments for INV-2026-0419: the first timed "
                      "out on our side and the payment provider retried it. I've refunded the second charge "
                      "of $4,800; it takes 5–10 business days to show on your statement."),
        ("user", "Thanks. Will this happen again next month?"),
        ("assistant", "No: the retry bug was fixed on 4 March, and payments now carry an idempotency key. I've "
                      "added a note to the Brightwater Dental account so billing double-checks next month's "
                      "run."),
    )),
    Needle("acme_timezone_reports", "acme", "Reports showing yesterday's numbers", "en", (
        ("user", "Our daily dashboard in Sydney shows the previous day's deliveries until 11am. Ticket "
                 "SUP-58210. Did something change? Lachlan McAllister, Koala Freight."),
        ("assistant", "Yes: since the daylight saving change on 5 April, Sydney is UTC+10, and the report job "
                      "still runs at 00:00 UTC. That's 10:00 your time, so until it finishes the dashboard "
                      "shows yesterday. The schedule should follow your workspace time zone, not UTC."),
        ("user", "Can you fix that for us?"),
        ("assistant", "Engineering has moved Koala Freight's report job to 00:15 Australia/Sydney, and the "
                      "general fix (schedules in the workspace's time zone) ships next Tuesday. SUP-58210 "
                      "stays open until then."),
    )),
    Needle("acme_public_bucket", "acme", "Bug bounty report: exports bucket", "en", (
        ("user", "HackerOne report 2219074: a researcher says our bucket acme-exports-prod is listable and "
                 "downloadable without auth. Can you verify? — Zainab"),
        ("assistant", "Confirmed: a terraform change on 22 February set the bucket ACL to public-read. The "
                      "access logs show 312 export files downloaded by 3 IP addresses outside our network "
                      "since then. I've blocked public access on the bucket."),
        ("user", "Who's affected?"),
        ("assistant", "The 312 files belong to 17 customers. Legal needs to assess the 72-hour notification; "
                      "I've drafted the list of tenants and file names for them, and a bounty recommendation "
                      "of $3,000 for the researcher."),
    )),
    Needle("acme_oncall_swap", "acme", "Quick question", "en", (
        ("user", "Can someone take my primary on-call from 24 to 26 December? Family thing in Kraków. I'd "
                 "cover New Year's Eve in exchange. — Mateusz"),
        ("assistant", "Aroha Ngata is free those days and has asked for 31 December off, so a swap works: Aroha "
                      "takes platform-primary 24–26 December and you take 30 December to 1 January. Shall I "
                      "update PagerDuty?"),
        ("user", "Yes please, and tell Aroha thanks."),
        ("assistant", "Updated the platform-primary schedule with two overrides and messaged Aroha. The holiday "
                      "pay rule applies to both of you."),
    )),
    Needle("acme_flag_rollout", "acme", "INC-735506: beta feature visible to every tenant", "en", (
        ("user", "INC-735506: Fjordline Ferries support asked what the new 'AI summaries' button is. It's "
                 "supposed to be a beta for 10 tenants only."),
        ("assistant", "The flag ai-summaries was changed at 13:48 UTC from a 10-tenant allowlist to a 100% "
                      "rollout: the percentage field and the allowlist were swapped in the edit. 2,140 tenants "
                      "could see a half-built feature for 52 minutes."),
        ("user", "Turned it back. Did anyone actually generate summaries?"),
        ("assistant", "41 summaries from 23 tenants, all with the beta model, none stored beyond the session. "
                      "I'd add a two-person review for flags that go to 100%, and I've drafted a note for "
                      "Fjordline Ferries."),
    )),
    Needle("acme_pentest_ssrf", "acme", "Pentest finding CR-2026-014", "en", (
        ("user", "Cobalt Ridge Security's pentest report rates CR-2026-014 as high, CVSS 8.6: the webhook URL "
                 "validator lets them reach 169.254.169.254 and read instance metadata."),
        ("assistant", "The validator checks the hostname before DNS resolution, so a domain that resolves to "
                      "the metadata address passes. The fix is to resolve first, reject link-local, private "
                      "and loopback ranges, and pin the resolved IP for the request. IMDSv2 on the workers "
                      "would also block the token fetch."),
        ("user", "Ship both. When can we tell Cobalt Ridge to retest?"),
        ("assistant", "The resolver fix is in release 2026.3.2, deployed Wednesday, and IMDSv2 is enforced on "
                      "the webhook workers. I've asked Cobalt Ridge for a retest on Friday."),
    )),
    Needle("acme_pdf_oom", "acme", "INC-738220: invoice PDFs not generated", "en", (
        ("user", "INC-738220: pdf-render pods are OOMKilled every 40 minutes since the Chromium 124 upgrade. "
                 "Month-end invoice PDFs are piling up, 9,300 in the queue."),
        ("assistant", "Memory grows by about 30 MB per document: the new Chromium keeps the page's fonts "
                      "cached per browser context and we never close contexts. Short term, restart the "
                      "browser every 200 documents; long term, close each context after rendering."),
        ("user", "Restart every 200 is deployed. Queue is draining."),
        ("assistant", "At the current rate the 9,300 PDFs are rendered by 18:30. INC-738220 mitigated; I've "
                      "opened a follow-up to close contexts properly and pin the Chromium version."),
    )),
    Needle("acme_gdpr_erasure", "acme", "Erasure request from an end user", "en", (
        ("user", "Northpeak Outdoors forwarded a right-to-erasure request from one of their users, "
                 "elke.vandamme@example.com. Ticket DSR-1093, deadline 14 March."),
        ("assistant", "We're the processor here, so we act on Northpeak's instruction. The user appears in "
                      "three places: their workspace, the search index and the nightly backups. I can delete "
                      "from the workspace and the index today; backups expire after 35 days, and we document "
                      "that in the reply."),
        ("user", "Go ahead and draft the confirmation to Northpeak."),
        ("assistant", "Deleted from the workspace and the search index. Draft for Northpeak: erasure completed "
                      "on 2 March for DSR-1093, backups roll off by 6 April, and no copies remain with "
                      "sub-processors."),
    )),
    # ------------------------------------------------------------------ French
    Needle("gh_fr_water_damage", "grand-hotel", "Dégât des eaux chambre 508", "fr", (
        ("user", "La baignoire de la 608 a débordé cette nuit : le client, M. Gaspard Lemaire-Duval, s'est "
                 "endormi avec le robinet ouvert. Le plafond de la 508 en dessous est trempé."),
        ("assistant", "J'ai fait couper l'eau de la 608 et envoyé le plombier de garde. La 508 est "
                      "inutilisable : Mme Ngozi Eze a été relogée en 512 avec le petit-déjeuner offert. J'ai "
                      "ouvert un dossier auprès de l'assureur, SIN-2026-3982."),
        ("user", "Est-ce qu'on peut facturer les dégâts à M. Lemaire-Duval ?"),
        ("assistant", "Oui, nos conditions le permettent en cas de négligence. Le devis du peintre est de "
                      "2 350 € pour le plafond et la moquette de la 508. Je propose de lui envoyer le devis "
                      "avec le constat signé par le veilleur de nuit avant de débiter sa carte."),
    )),
    Needle("gh_fr_ring_pool", "grand-hotel", "Bague perdue", "fr", (
        ("user", "Bonjour, j'ai perdu ma bague de fiançailles dans la piscine extérieure hier vers 17h. C'est "
                 "un solitaire en or blanc, très important pour moi. Solène Marchetti, chambre 214."),
        ("assistant", "Je suis vraiment désolé, Madame Marchetti. J'ai prévenu le maître-nageur et l'équipe "
                      "technique : ils vont vérifier le skimmer et le filtre ce soir après la fermeture, à "
                      "20h."),
        ("user", "Merci, je croise les doigts."),
        ("assistant", "Bonne nouvelle : le technicien, Anselmo, a retrouvé votre bague dans le panier du "
                      "skimmer n° 3. Elle vous attend au coffre de la réception, sur présentation d'une pièce "
                      "d'identité."),
    )),
    Needle("gh_fr_bakery_price", "grand-hotel", "Hausse de prix du boulanger", "fr", (
        ("user", "La boulangerie Maison Fériaud nous envoie la facture FAC-2026-0311 avec les croissants à "
                 "0,92 € au lieu de 0,78 €, soit +18 %, sans préavis. On en prend 1 100 par semaine."),
        ("assistant", "Le contrat signé en septembre fixe le prix jusqu'au 31 août et exige un préavis de 60 "
                      "jours pour toute hausse. Elle ne s'applique donc pas : sur cette facture, l'écart est "
                      "de 154 € pour la semaine."),
        ("user", "Rédige une réponse polie mais ferme."),
        ("assistant", "Brouillon : « Bonjour Monsieur Fériaud, nous avons bien reçu la facture FAC-2026-0311. "
                      "Notre contrat prévoit 0,78 € par croissant jusqu'au 31 août ; merci de nous adresser un "
                      "avoir de 154 €. Nous restons ouverts à une discussion sur les tarifs de la rentrée. »"),
    )),
    Needle("acme_fr_csv_accents", "acme", "Export CSV : accents illisibles", "fr", (
        ("user", "Bonjour, quand j'ouvre l'export CSV de nos commandes dans Excel, les accents sont remplacés "
                 "par des caractères bizarres : « Ã© » au lieu de « é ». Nos titres de livres sont "
                 "illisibles. Anne-Laure Gosselin, Librairie Papyrus."),
        ("assistant", "Bonjour Madame Gosselin ! L'export est en UTF-8 sans BOM, et Excel sous Windows suppose "
                      "alors un autre encodage. Deux solutions : dans Excel, Données → À partir d'un fichier "
                      "texte, en choisissant UTF-8 ; ou cochez « Compatible Excel » dans les paramètres "
                      "d'export, qui ajoute le BOM."),
        ("user", "La case « Compatible Excel » marche parfaitement, merci !"),
    )),
    # ------------------------------------------------------------------ German
    Needle("gh_de_coach_group", "grand-hotel", "Reisegruppe Alpenblick: Ankunft und Busparkplatz", "de", (
        ("user", "Guten Tag, ich bin die Reiseleiterin der Gruppe von Alpenblick Reisen, Buchungsnummer "
                 "AR-7731, 44 Gäste. Unser Bus kommt wegen eines Staus erst gegen 23 Uhr an. Wo kann der "
                 "Fahrer den Reisebus abstellen? Gudrun Obermaier"),
        ("assistant", "Guten Tag Frau Obermaier! Die Schlüssel für alle 22 Zimmer liegen bereit, der "
                      "Nachtportier erwartet Sie. Vor dem Hotel darf der Bus nur zum Aussteigen halten; parken "
                      "kann er auf dem Busparkplatz am Kreuzfahrtterminal, acht Minuten entfernt, für 35 € pro "
                      "Nacht."),
        ("user", "Und könnten wir nach der Ankunft noch eine Kleinigkeit essen?"),
        ("assistant", "Natürlich: die Küche stellt für 44 Personen einen kalten Imbiss mit Suppe, Sandwiches "
                      "und Obst in den Frühstücksraum, bis Mitternacht. Das kostet 12 € pro Person und geht auf "
                      "die Gruppenrechnung."),
    )),
    Needle("gh_de_mould_bathroom", "grand-hotel", "Schimmel im Bad, Zimmer 227", "de", (
        ("user", "Guten Abend, im Badezimmer von Zimmer 227 ist schwarzer Schimmel an der Decke über der "
                 "Dusche. Ich bin Allergiker und bekomme schon Kopfschmerzen. Matthias Kettenbach"),
        ("assistant", "Das tut mir sehr leid, Herr Kettenbach. Ich verlege Sie sofort in Zimmer 231 mit "
                      "Luftreiniger; ein Page hilft Ihnen in zehn Minuten mit dem Gepäck. Zimmer 227 sperren "
                      "wir, bis die Haustechnik die Lüftung geprüft hat."),
        ("user", "Danke. Zimmer 231 ist viel besser."),
        ("assistant", "Freut mich. Die Haustechnik hat einen defekten Abluftventilator gefunden; ein Maler "
                      "saniert die Decke am Donnerstag. Als Entschuldigung übernehmen wir heute Ihre Minibar "
                      "und das Abendessen."),
    )),
    Needle("gh_de_wine_breakage", "grand-hotel", "Weinlieferung mit Bruch", "de", (
        ("user", "Die Lieferung vom Weingut Hohenreuth ist da: von 120 Flaschen Riesling Spätlese 2019 sind "
                 "17 zerbrochen, der Karton war durchnässt. Lieferschein LS-448120. Lukas"),
        ("assistant", "Ich habe den Schaden mit Fotos dokumentiert und an die Spedition Rheinfracht gemeldet. "
                      "Die Ware wurde frei Haus geliefert, also trägt der Lieferant den Schaden: 17 Flaschen zu "
                      "24,50 € sind 416,50 €."),
        ("user", "Wir brauchen den Wein aber für das Degustationsmenü am Samstag."),
        ("assistant", "Weingut Hohenreuth schickt die 17 Flaschen per Express, Ankunft Freitag bis 12 Uhr. "
                      "Falls es nicht klappt, hat unsere Sommelière 24 Flaschen eines ähnlichen Rieslings aus "
                      "dem Keller reserviert."),
    )),
    Needle("acme_de_leaked_key", "acme", "API-Schlüssel versehentlich veröffentlicht", "de", (
        ("user", "Hallo, unser Werkstudent hat gestern einen API-Schlüssel in ein öffentliches "
                 "GitHub-Repository committet. GitHub hat uns heute früh gewarnt. Was müssen wir tun? "
                 "Jörg Pfannkuch, Stadtwerke Ulm"),
        ("assistant", "Guten Tag Herr Pfannkuch! Bitte widerrufen Sie den Schlüssel sofort unter Einstellungen "
                      "→ API-Schlüssel; es ist der Schlüssel 'sync-prod', angelegt am 14. Januar. Danach "
                      "erstellen Sie einen neuen und tragen ihn in Ihrer Synchronisation ein. Ich habe dazu "
                      "das Ticket SEC-4418 angelegt."),
        ("user", "Erledigt. Hat jemand den alten Schlüssel benutzt?"),
        ("assistant", "Im Audit-Log gibt es zwischen dem Commit um 16:12 und dem Widerruf heute um 08:47 nur "
                      "Aufrufe von Ihren eigenen IP-Adressen in Ulm, also keine Hinweise auf Missbrauch. Ich "
                      "empfehle trotzdem, den Git-Verlauf zu bereinigen."),
    )),
    # ------------------------------------------------------------------ Spanish
    Needle("gh_es_stolen_passport", "grand-hotel", "Perdí mi pasaporte", "es", (
        ("user", "Hola, creo que me robaron el pasaporte mexicano ayer en el tranvía 28. Vuelo a Ciudad de "
                 "México el viernes. ¿Qué hago? Guadalupe Ortega, habitación 506."),
        ("assistant", "Lo siento mucho, señora Ortega. Primero hay que denunciarlo en la PSP (la policía); la "
                      "comisaría más cercana está en la Rua da Palma. Con la denuncia, la Embajada de México "
                      "puede emitirle un pasaporte de emergencia. He pedido una cita: jueves a las 10:00."),
        ("user", "Gracias. ¿Qué documentos necesito?"),
        ("assistant", "La denuncia policial, dos fotografías tamaño pasaporte (hay un fotógrafo en la Rua "
                      "Augusta que las hace en 10 minutos), una copia del pasaporte y el billete de avión. Le "
                      "he impreso la copia que guardamos al registrarse."),
    )),
    Needle("gh_es_twin_cribs", "grand-hotel", "Cunas para gemelos", "es", (
        ("user", "Buenas tardes, llegamos el sábado con nuestros gemelos de ocho meses. ¿Pueden poner dos "
                 "cunas en la habitación 318 y un calentador de biberones? Ximena Valderrama"),
        ("assistant", "¡Claro que sí, señora Valderrama! La habitación 318 es amplia: pondremos dos cunas con "
                      "sábanas de algodón, un calentador de biberones, una bañera para bebés y protectores "
                      "para los enchufes. Todo sin coste."),
        ("user", "Qué maravilla. ¿Tienen también servicio de niñera?"),
        ("assistant", "Sí, trabajamos con una agencia de niñeras con certificado de primeros auxilios: 18 € "
                      "por hora, mínimo 3 horas, reservando con 24 horas de antelación. ¿Quiere que reserve "
                      "para el sábado por la noche?"),
    )),
    Needle("acme_es_canary_tax", "acme", "IVA mal aplicado", "es", (
        ("user", "Hola, somos Ferretería Teide, de Tenerife, y la factura INV-2026-0733 nos cobra el IVA del "
                 "21 %. En Canarias no se aplica IVA sino el IGIC. ¿Pueden corregirla?"),
        ("assistant", "Tiene toda la razón, disculpe. Nuestro sistema de facturación trataba todo código postal "
                      "español como península. He emitido una factura rectificativa, INV-2026-0733-R, sin "
                      "IVA: como servicio digital entre empresas, el IGIC lo autoliquida su empresa."),
        ("user", "Perfecto. ¿Y las facturas anteriores?"),
        ("assistant", "Hay cuatro facturas anteriores con el mismo error, de noviembre a febrero. Las "
                      "rectificamos todas y le devolvemos 1.512 € a la tarjeta. Además, los códigos postales "
                      "35 y 38 ya se reconocen como Canarias."),
    )),
    # ------------------------------------------------------------------ Portuguese
    Needle("gh_pt_facade_tiles", "grand-hotel", "Azulejos caídos na fachada", "pt", (
        ("user", "Caíram três azulejos da fachada para o passeio da Rua das Flores esta manhã. Ninguém ficou "
                 "ferido, mas a Câmara já mandou um fiscal."),
        ("assistant", "Vedei o passeio com baias e avisei a portaria para os hóspedes usarem a entrada lateral. "
                      "A fachada é protegida (azulejos de 1870), por isso o restauro tem de ser feito por uma "
                      "oficina certificada. Pedi orçamento à Oficina Viúva Lamego."),
        ("user", "Chegou o orçamento ORC-4410: 7.800 euros e andaime durante três semanas."),
        ("assistant", "O fiscal exige o andaime com rede de proteção até ao restauro. Proponho aprovar o "
                      "ORC-4410 e pedir à Câmara a licença de ocupação da via pública; a montagem pode começar "
                      "na segunda-feira, 16 de março."),
    )),
    Needle("gh_pt_wheelchair", "grand-hotel", "Quarto adaptado", "pt", (
        ("user", "Olá! Sou cadeirante e vou com minha esposa de 2 a 6 de junho. Vocês têm quarto adaptado "
                 "com chuveiro sem degrau? E dá para alugar uma cadeira motorizada para o passeio a Sintra? "
                 "Raimundo Nonato Bezerra"),
        ("assistant", "Olá, Sr. Bezerra! Sim: o quarto 102 é adaptado, com chuveiro de nível, barras de apoio "
                      "e cama a 50 cm. Para Sintra, uma cadeira de rodas motorizada custa 35 € por dia na "
                      "Mobilidade Lisboa, entregue no hotel."),
        ("user", "Ótimo, reserve o 102 e a cadeira para o dia 4."),
        ("assistant", "Feito: quarto 102 de 2 a 6 de junho e cadeira motorizada entregue no dia 4 às 8h30. "
                      "Também reservei uma carrinha com rampa e motorista para ir a Sintra, por 180 €."),
    )),
    Needle("acme_pt_usd_billing", "acme", "Cobrança em dólar em vez de real", "pt", (
        ("user", "Oi! Mudamos para o plano Business e a fatura INV-2026-0588 veio em dólares, US$ 1.340, em "
                 "vez de reais. Nosso cartão cobrou IOF em cima. Thaís, do Mercadinho Boa Vista"),
        ("assistant", "Oi, Thaís! Desculpe. Na troca de plano, a conta perdeu a moeda BRL e voltou ao padrão "
                      "em USD. Estornei a fatura INV-2026-0588 e emiti uma nova em reais, R$ 6.920, com nota "
                      "fiscal."),
        ("user", "E o IOF que o banco cobrou?"),
        ("assistant", "O IOF de R$ 440 vamos reembolsar como crédito na próxima fatura, já que o erro foi "
                      "nosso. A moeda da conta agora está fixada em BRL."),
    )),
)


QUERIES: tuple[Query, ...] = (
    # ------------------------------------------------------------------ identifier (15)
    Query("PO-55817", "identifier", "gh_linen_wrong_size", "purchase order number"),
    Query("BKG-77310", "identifier", "gh_chargeback",
          "same prefix as the demo's BKG-88213 and the parrot's BKG-77402"),
    Query("SCH-884120", "identifier", "gh_lift_entrapment", "lift maintenance ticket"),
    Query("QT-2026-118", "identifier", "gh_chandelier", "quote id; 2026 occurs in other ids"),
    Query("PZ-64408", "identifier", "gh_bed_bugs", "pest-control job number"),
    Query("CLM-2026-0087", "identifier", "gh_walkin_freezer", "insurance claim"),
    Query("GRP-DH-1011", "identifier", "gh_marathon_group", "group code"),
    Query("INC-731942", "identifier", "acme_dkim_spam", "incident id; the demo is full of INC-4xxxxx"),
    Query("INV-2026-0419", "identifier", "acme_double_charge", "invoice id; siblings INV-2026-0733 and -0588"),
    Query("SUP-58210", "identifier", "acme_timezone_reports", "support ticket"),
    Query("INC-735506", "identifier", "acme_flag_rollout", "incident id, also in the title"),
    Query("CR-2026-014", "identifier", "acme_pentest_ssrf", "pentest finding id"),
    Query("FAC-2026-0311", "identifier", "gh_fr_bakery_price", "French invoice number"),
    Query("AR-7731", "identifier", "gh_de_coach_group", "short booking reference in a German needle"),
    Query("SEC-4418", "identifier", "acme_de_leaked_key", "ticket id in a German needle"),
    # ------------------------------------------------------------------ name (15)
    Query("Tejo Têxteis", "name", "gh_linen_wrong_size", "supplier name with a diacritic"),
    Query("Desmond Achterberg", "name", "gh_parrot", "guest name"),
    Query("Viktor Lindahl", "name", "gh_chargeback", "guest name"),
    Query("Caoimhe Fitzgerald", "name", "gh_fire_alarm_straightener", "Irish first name, rare token"),
    Query("Kettleworth sweater", "name", "gh_cashmere_laundry", "surname plus a word from the title"),
    Query("Marisol Quintero", "name", "gh_celebrity_alias", "celebrity name"),
    Query("Siobhan Gallagher", "name", "gh_marathon_group", "client name"),
    Query("Ólafur Sigurðsson", "name", "gh_deaf_guest_kit", "Icelandic letters"),
    Query("Aroha Ngata", "name", "acme_oncall_swap", "colleague name in a vaguely titled chat"),
    Query("Fjordline Ferries", "name", "acme_flag_rollout", "customer name"),
    Query("Cobalt Ridge", "name", "acme_pentest_ssrf", "vendor name"),
    Query("Solène Marchetti", "name", "gh_fr_ring_pool", "guest name in a French needle"),
    Query("Guadalupe Ortega", "name", "gh_es_stolen_passport", "guest name in a Spanish needle"),
    Query("Ximena Valderrama", "name", "gh_es_twin_cribs", "guest name in a Spanish needle"),
    Query("Raimundo Bezerra", "name", "gh_pt_wheelchair", "middle name left out"),
    # ------------------------------------------------------------------ keyword (20)
    Query("swarm parasol", "keyword", "gh_bees_rooftop", ""),
    Query("insulin pens minibar", "keyword", "gh_insulin_fridge", "minibar is frequent in the background"),
    Query("crystal chandelier arms", "keyword", "gh_chandelier", ""),
    Query("streaming series lobby", "keyword", "gh_film_crew", "'streaming' also a message state"),
    Query("bites mattress seam", "keyword", "gh_bed_bugs", ""),
    Query("hair straightener steam", "keyword", "gh_fire_alarm_straightener", ""),
    Query("string quartet sunset", "keyword", "gh_rooftop_proposal", ""),
    Query("dosing pump relay", "keyword", "gh_pool_chlorine", ""),
    Query("compressor alarm SIM", "keyword", "gh_walkin_freezer", "'alarm' comes from \"alarm's\""),
    Query("IOF cartão", "keyword", "acme_pt_usd_billing", "Portuguese, an acronym"),
    Query("DKIM selector truncated", "keyword", "acme_dkim_spam", ""),
    Query("daylight saving Sydney", "keyword", "acme_timezone_reports", ""),
    Query("bucket ACL public-read", "keyword", "acme_public_bucket", "hyphenated token"),
    Query("OOMKilled Chromium", "keyword", "acme_pdf_oom", ""),
    Query("erasure request", "keyword", "acme_gdpr_erasure", "also in the title"),
    Query("croissants préavis", "keyword", "gh_fr_bakery_price", "French, accented"),
    Query("caractères bizarres", "keyword", "acme_fr_csv_accents", "French, accented"),
    Query("Schimmel Dusche", "keyword", "gh_de_mould_bathroom", "German nouns"),
    Query("Flaschen zerbrochen", "keyword", "gh_de_wine_breakage", "German"),
    Query("IGIC Canarias", "keyword", "acme_es_canary_tax", "Spanish"),
    # ------------------------------------------------------------------ paraphrase (30)
    Query("stinging insects gathered beside roof swimming area", "paraphrase", "gh_bees_rooftop",
          "no 'bees', 'swarm', 'rooftop' or 'pool'"),
    Query("bedding shipment had incorrect dimensions from textile vendor", "paraphrase", "gh_linen_wrong_size",
          "no 'linen', 'duvet', 'king', 'queen'"),
    Query("chilled storage for diabetes injection medicine", "paraphrase", "gh_insulin_fridge",
          "no 'insulin', 'fridge', 'diabetic'"),
    Query("visitor brought talking feathered companion despite animal ban", "paraphrase", "gh_parrot",
          "no 'parrot', 'pet', 'cage'"),
    Query("antique hanging lamp broke, glass repair estimate", "paraphrase", "gh_chandelier",
          "no 'chandelier', 'crystal', 'quote'"),
    Query("elderly woman trapped inside elevator, freed by firefighters", "paraphrase", "gh_lift_entrapment",
          "no 'lift', 'stuck', 'brigade'"),
    Query("traveller reversed payment via bank claiming nothing delivered", "paraphrase", "gh_chargeback",
          "no 'chargeback', 'disputed', 'card'"),
    Query("television team recording an episode in entrance hall", "paraphrase", "gh_film_crew",
          "no 'film', 'shoot', 'lobby'"),
    Query("parasite infestation where visitor slept, exterminator", "paraphrase", "gh_bed_bugs",
          "no 'bed bugs', 'bites', 'insect'"),
    Query("people sent outdoors before dawn because of beauty appliance", "paraphrase",
          "gh_fire_alarm_straightener", "no 'fire', 'alarm', 'evacuation', 'hair'"),
    Query("expensive wool jumper shrank after washing", "paraphrase", "gh_cashmere_laundry",
          "no 'cashmere', 'sweater', 'laundry'"),
    Query("marriage question surprise on roof at dusk, musicians", "paraphrase", "gh_rooftop_proposal",
          "no 'propose', 'ring', 'sunset', 'quartet'"),
    Query("famous vocalist checking in incognito, paparazzi outside", "paraphrase", "gh_celebrity_alias",
          "no 'singer', 'alias', 'photographers'"),
    Query("youngsters' vision irritated by excessive disinfectant while swimming", "paraphrase", "gh_pool_chlorine",
          "no 'children', 'eyes', 'chlorine', 'pool'"),
    Query("spoiled seafood after refrigeration breakdown", "paraphrase", "gh_walkin_freezer",
          "no 'freezer', 'scallops', 'thawed'"),
    Query("joggers team needing predawn meal before long-distance event", "paraphrase", "gh_marathon_group",
          "no 'marathon', 'runners', 'breakfast', 'early'"),
    Query("hearing impaired traveller emergency signalling equipment", "paraphrase", "gh_deaf_guest_kit",
          "no 'deaf', 'visual', 'strobe'"),
    Query("forgotten login messages ending up in junk folder", "paraphrase", "acme_dkim_spam",
          "no 'password', 'reset', 'spam', 'gmail'"),
    Query("dentist practice debited duplicate sum", "paraphrase", "acme_double_charge",
          "no 'charged', 'twice', 'invoice', 'dental'"),
    Query("australian client metrics lagging behind by 24 hours", "paraphrase", "acme_timezone_reports",
          "no 'Sydney', 'dashboard', 'yesterday'"),
    Query("cloud storage exposed to anonymous downloads", "paraphrase", "acme_public_bucket",
          "no 'bucket', 'public', 'downloadable'"),
    Query("trading christmas pager duty with coworker", "paraphrase", "acme_oncall_swap",
          "no 'on-call', 'December', 'swap'; the title is just 'Quick question'"),
    Query("unfinished functionality accidentally exposed to everyone, toggle mistake", "paraphrase",
          "acme_flag_rollout",
          "no 'flag', 'beta', 'rollout', 'tenants'"),
    Query("auditors reached internal cloud credentials through callback endpoint", "paraphrase",
          "acme_pentest_ssrf", "no 'SSRF', 'webhook', 'metadata', 'pentest'"),
    Query("billing files stuck, renderer crashing from RAM exhaustion", "paraphrase", "acme_pdf_oom",
          "no 'PDF', 'OOMKilled', 'memory', 'invoice'"),
    Query("privacy law deletion demand relayed through client", "paraphrase", "acme_gdpr_erasure",
          "no 'erasure', 'GDPR', 'deleted'"),
    Query("inondation chez voisin inférieur : qui paie réparation ?", "paraphrase", "gh_fr_water_damage",
          "French paraphrase: no 'baignoire', 'débordé', 'dégât', 'plafond'"),
    Query("Pilzbefall Nasszelle, Gast umquartiert", "paraphrase", "gh_de_mould_bathroom",
          "German paraphrase: no 'Schimmel', 'Bad', 'Zimmer'"),
    Query("mellizos pequeñitos necesitan camitas", "paraphrase", "gh_es_twin_cribs",
          "Spanish paraphrase: no 'gemelos', 'cunas', 'bebés'"),
    Query("cerâmica antiga desprendeu-se do edifício histórico", "paraphrase", "gh_pt_facade_tiles",
          "Portuguese paraphrase: no 'azulejos', 'fachada', 'caíram'"),
    # ------------------------------------------------------------------ multilingual (20)
    Query("bathtub overflow soaked ceiling of room below", "multilingual", "gh_fr_water_damage",
          "English query, French needle"),
    Query("engagement ring lost in swimming pool", "multilingual", "gh_fr_ring_pool",
          "English query, French needle"),
    Query("bakery raised pastry prices without warning", "multilingual", "gh_fr_bakery_price",
          "English query, French needle"),
    Query("garbled special characters opening spreadsheet download", "multilingual", "acme_fr_csv_accents",
          "English query, French needle"),
    Query("where to park tour coach, German travel group arriving late", "multilingual", "gh_de_coach_group",
          "English query, German needle"),
    Query("mold above shower made allergic guest ill", "multilingual", "gh_de_mould_bathroom",
          "English query, German needle"),
    Query("broken wine bottles in winery shipment", "multilingual", "gh_de_wine_breakage",
          "English query, German needle"),
    Query("customer accidentally published secret token in open source code", "multilingual",
          "acme_de_leaked_key", "English query, German needle"),
    Query("stolen travel document, embassy appointment for emergency replacement", "multilingual",
          "gh_es_stolen_passport", "English query, Spanish needle"),
    Query("cots for twin babies and bottle warmer", "multilingual", "gh_es_twin_cribs",
          "English query, Spanish needle"),
    Query("wrong sales tax for Canary Islands company", "multilingual", "acme_es_canary_tax",
          "English query, Spanish needle"),
    Query("tiles fell off the building front onto sidewalk", "multilingual", "gh_pt_facade_tiles",
          "English query, Portuguese needle"),
    Query("wheelchair user needs step-free shower and electric scooter", "multilingual", "gh_pt_wheelchair",
          "English query, Portuguese needle"),
    Query("charged in American money instead of Brazilian currency", "multilingual", "acme_pt_usd_billing",
          "English query, Portuguese needle"),
    Query("essaim d'abeilles près de la piscine sur le toit", "multilingual", "gh_bees_rooftop",
          "French query, English needle"),
    Query("Gast mit Papagei trotz Tierverbot", "multilingual", "gh_parrot",
          "German query, English needle"),
    Query("huésped atrapada en el ascensor de servicio", "multilingual", "gh_lift_entrapment",
          "Spanish query, English needle"),
    Query("Laufverein braucht Frühstück vor dem Wettlauf", "multilingual", "gh_marathon_group",
          "German query, English needle"),
    Query("facture payée deux fois, remboursement", "multilingual", "acme_double_charge",
          "French query, English needle"),
    Query("Zeitzonenfehler: australischer Kunde sieht Berichte vom Vortag", "multilingual",
          "acme_timezone_reports", "German query, English needle"),
)


if __name__ == "__main__":
    # No imports even here: the module stays pure data.
    ALLOWED = {"a", "the", "of", "to", "in", "on", "for", "and", "with", "at"}
    KINDS = {"identifier", "name", "keyword", "paraphrase", "multilingual"}

    def tokens(text: str) -> list[str]:
        """Lowercased tokens, split on non-word characters (as `re.split(r"\W+")` would)."""
        spaced = "".join(ch if ch.isalnum() or ch == "_" else " " for ch in text.lower())
        return spaced.split()

    def count(items) -> dict:
        out: dict = {}
        for item in items:
            out[item] = out.get(item, 0) + 1
        return out

    by_key = {n.key: n for n in NEEDLES}
    assert len(by_key) == len(NEEDLES), "needle keys are not unique"
    problems = []
    for n in NEEDLES:
        if not n.key or n.key != n.key.lower() or not all(p.isalnum() and p.isascii() for p in n.key.split("_")):
            problems.append(f"{n.key}: key is not snake_case")
        if n.workspace not in ("grand-hotel", "acme"):
            problems.append(f"{n.key}: workspace {n.workspace}")
        if n.language not in ("en", "fr", "de", "es", "pt"):
            problems.append(f"{n.key}: language {n.language}")
        if not 3 <= len(n.messages) <= 6:
            problems.append(f"{n.key}: {len(n.messages)} messages")
        for i, (role, _body) in enumerate(n.messages):
            if role != ("user" if i % 2 == 0 else "assistant"):
                problems.append(f"{n.key}: message {i} has role {role}, not alternating from user")
    seen_q = set()
    for q in QUERIES:
        if (q.text, q.target) in seen_q:
            problems.append(f"duplicate query {q.text!r}")
        seen_q.add((q.text, q.target))
        if q.kind not in KINDS:
            problems.append(f"{q.text!r}: kind {q.kind}")
        n = by_key.get(q.target)
        if n is None:
            problems.append(f"{q.text!r}: unknown target {q.target}")
            continue
        everything = n.title + "\n" + "\n".join(body for _, body in n.messages)
        all_tokens = set(tokens(everything))
        q_tokens = tokens(q.text)
        if q.kind == "identifier":
            if q.text not in everything:
                problems.append(f"{q.text!r}: identifier not verbatim in {n.key}")
            for other in NEEDLES:
                if other.key != n.key and q.text in other.title + "".join(b for _, b in other.messages):
                    problems.append(f"{q.text!r}: identifier also in {other.key}")
        elif q.kind == "name":
            missing = [t for t in q_tokens if t not in all_tokens]
            if missing:
                problems.append(f"{q.text!r}: name words {missing} not in {n.key}")
        elif q.kind == "keyword":
            if not 2 <= len(q_tokens) <= 4:
                problems.append(f"{q.text!r}: keyword query of {len(q_tokens)} tokens")
            if not any(set(q_tokens) <= set(tokens(body)) for _, body in n.messages):
                problems.append(f"{q.text!r}: keyword words not all in one message of {n.key}")
        elif q.kind in ("paraphrase", "multilingual"):
            shared = sorted((set(q_tokens) & all_tokens) - ALLOWED)
            if q.kind == "multilingual":
                shared = [t for t in shared if len(t) > 1]  # elided French articles: d', l'
            if shared:
                problems.append(f"{q.text!r} ({q.kind}): shares {shared} with {n.key}")
            if q.kind == "paraphrase" and not 3 <= len(q_tokens) <= 9:
                problems.append(f"{q.text!r}: paraphrase of {len(q_tokens)} words")
    per_needle = count(q.target for q in QUERIES)
    for n in NEEDLES:
        if per_needle.get(n.key, 0) < 2:
            problems.append(f"{n.key}: only {per_needle.get(n.key, 0)} queries")
    if problems:
        raise SystemExit("eval_set problems:\n  " + "\n  ".join(problems))

    print(f"{len(NEEDLES)} needles, {len(QUERIES)} queries: OK")
    print("needles by language:", count(n.language for n in NEEDLES))
    print("needles by workspace:", count(n.workspace for n in NEEDLES))
    print("queries by kind:", count(q.kind for q in QUERIES))
