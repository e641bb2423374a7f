"""A labelled evaluation set of long dialogues: small teams talking over many sittings, and questions about who said what.

Each dialogue is one conversation between two or three colleagues, held over four to seven sittings spread
over weeks (a party being planned, a renovation, a vendor dispute, an incident follow-up, a hire, a
migration...). Its topics recur: the same words ("the venue", "the invoice", "the drain") are said in several
sittings by different people, while only one message settles the matter. The benchmark mixes the dialogues
into the demo corpus of `backscroll/demo/corpus.py` (workspaces grand-hotel and acme) next to the needles of
`bench/eval_set.py`, and measures how well lexical ranking (BM25 or ts_rank_cd, with or without the speakers'
names in the document) and vector or hybrid search find the message that answers each question.

First names recur across dialogues, as they do in real workspaces (a Tom in a hotel dialogue and another in
an acme one, two Martas, two Camilles...), and nobody says their own name.

Question kinds (the target is always one message: a sitting and a turn of a dialogue):
- speaker: names who said it (first or full name) and uses mostly other words than the target message: at
  most one content word in common with it, and that word is also said by someone else in the dialogue, so
  that the word alone does not single the target out;
- speaker_paraphrase: names the speaker and shares no content word with the target message;
- topic: no speaker, 2-5 words a person would type, at least two of them in the target message, which
  contains more of them than any other message of its dialogue;
- speaker_other_language: names the speaker, in another language than the dialogue; its note starts with
  "<question language> question".

Content words are the tokens of `re.findall(r"\\w+", text.lower())` outside a small stopword set (common
function words of en/fr/de/es, question words, and verbs of saying) and outside the speaker's own name.

Pure data; `python3 bench/eval_dialogues.py` checks the set's consistency and prints its counts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Person:
    key: str            # short id, unique within the dialogue, e.g. "priya"
    display_name: str   # e.g. "Priya Raman" (what the search document gets in a weight class of its own)


@dataclass(frozen=True)
class Sitting:
    days_ago: int                          # when this sitting happened; sittings in decreasing days_ago order
    turns: tuple[tuple[str, str], ...]     # (person key, body); 5-10 turns, bodies 1-3 sentences


@dataclass(frozen=True)
class Dialogue:
    key: str            # unique snake_case
    workspace: str      # "grand-hotel" or "acme"
    title: str
    language: str       # "en", "fr", "de", "es"
    people: tuple[Person, ...]     # 2 or 3
    sittings: tuple[Sitting, ...]  # 4-7 sittings spread over weeks


@dataclass(frozen=True)
class Question:
    text: str
    kind: str           # "speaker" | "speaker_paraphrase" | "topic" | "speaker_other_language"
    dialogue: str       # Dialogue.key
    sitting: int        # index of the target sitting
    turn: int           # index of the target turn (the message that answers)
    note: str = ""


DIALOGUES: tuple[Dialogue, ...] = (
    # ================================================================== grand-hotel, English
    Dialogue("gh_staff_party", "grand-hotel", "Staff summer party", "en", (
        Person("priya", "Priya Raman"),
        Person("tom", "Tom Hadley"),
        Person("helen", "Helen Marsh"),
    ), (
        Sitting(58, (
            ("priya", "Kicking off the staff summer party planning. Last year's barbecue in the car park got mixed "
                      "reviews, so I'd like somewhere off-site this time."),
            ("tom", "Off-site works for my team, as long as it's a Monday or Tuesday when banqueting is quiet. Most "
                    "of the kitchen can't do weekends in July."),
            ("helen", "Before anyone books anything: the budget is £6,500 all in, same as last year, and it has to "
                      "cover about 120 people."),
            ("priya", "That's about £54 a head. Tight for a venue with food, but doable if we skip the band."),
            ("tom", "I'd rather skip the band than the food. Nobody remembers the music, everybody remembers cold "
                    "burgers."),
            ("helen", "Fair. Send me two or three options with prices and I'll check them against the budget."),
        )),
        Sitting(51, (
            ("tom", "I've got a quote from the Quayside Hotel: the Lantern Room takes 140 standing, buffet and two "
                    "drinks each for £48 a head."),
            ("priya", "Nice. I also asked the Saltmarsh Boathouse, they want £4,000 for the venue alone plus their "
                      "own caterer."),
            ("helen", "The Boathouse blows the budget before anyone has eaten. The Quayside leaves us roughly £700 "
                      "for extras."),
            ("tom", "Their events manager can hold Monday the 14th or Tuesday the 22nd until Friday."),
            ("priya", "Let me run a quick poll on the two dates before we commit."),
            ("helen", "Remember the night team: whatever date we pick, a few people will have to stay behind."),
        )),
        Sitting(44, (
            ("priya", "Poll results: 71 votes for Monday the 14th, 38 for Tuesday the 22nd."),
            ("tom", "The 14th clashes with the Castleton conference lunch, but it ends at three, so my team can "
                    "still make it by seven."),
            ("helen", "Is the venue deposit refundable if we have to cancel?"),
            ("tom", "Half of it, up to 30 days before. The deposit is £1,200."),
            ("priya", "Then let's go for it: book the Lantern Room at the Quayside for Monday the 14th, 7pm until "
                      "midnight. I'll send the save-the-date today."),
            ("helen", "I'll raise the purchase order for the deposit first thing tomorrow."),
        )),
        Sitting(36, (
            ("tom", "The Quayside sent their buffet menu. It's heavy on seafood, which won't work for a lot of our "
                    "people."),
            ("priya", "From the sign-up form: 14 vegetarian, 6 vegan, 3 with nut allergies and 2 who can't eat "
                      "shellfish."),
            ("tom", "I asked them to swap the prawn skewers for halloumi and add a vegan curry. They'll label every "
                    "dish with allergens."),
            ("helen", "Does the swap change the price per head?"),
            ("tom", "No, they're keeping it at £48."),
            ("priya", "Great. I'll put the allergy list in the shared folder so their chef has names as well as "
                      "numbers."),
        )),
        Sitting(27, (
            ("helen", "Transport question: the Quayside is 25 minutes out, and the last tram back leaves at 23:10."),
            ("priya", "We can't have people stranded at midnight. What did the coach company quote?"),
            ("helen", "Coastline Coaches want £390 for two 50-seaters doing a return run, leaving here at 18:30 and "
                      "heading back at 00:15."),
            ("tom", "Add a drop-off at the staff accommodation on Mill Lane, half the kitchen lives there."),
            ("helen", "Done, they'll add Mill Lane for no extra charge. That leaves about £350 for extras."),
            ("priya", "Let's spend that on the raffle. A spa day and a dinner for two would go down well."),
        )),
        Sitting(19, (
            ("tom", "Raffle prizes: the spa can donate two treatments, and I can put up a chef's table dinner for "
                    "two."),
            ("priya", "Perfect. I'd also like a prize from the GM, maybe an extra day of annual leave?"),
            ("helen", "Leave isn't mine to give, but if the GM agrees I have no objection on the finance side."),
            ("priya", "I'll ask her on Thursday. Tickets are free, one per person, and the draw is at ten."),
            ("tom", "Who's on the night desk that evening? Someone is going to feel left out."),
            ("priya", "Two volunteers from reception are covering. They get a £50 voucher each and a takeaway box "
                      "from the buffet."),
        )),
    )),
    Dialogue("gh_spa_refurb", "grand-hotel", "Spa refurbishment, phase 2", "en", (
        Person("rachel", "Rachel Dunmore"),
        Person("marcus", "Marcus Doyle"),
        Person("sanjay", "Sanjay Mehta"),
    ), (
        Sitting(80, (
            ("rachel", "Phase 2 of the spa refurbishment: Halden Build can start on the 3rd and they say eight "
                       "weeks. I want the steam room and the changing rooms done before the autumn season."),
            ("marcus", "Eight weeks is optimistic. The steam room sits on the old drainage, and nobody has opened "
                       "that floor since 1998."),
            ("sanjay", "If the steam room closes, I'd like to keep at least the treatment rooms open. Those are 70% "
                       "of our spa revenue."),
            ("rachel", "Agreed, treatments stay open. Marcus, can you get Halden to survey the floor before they "
                       "commit to a date?"),
            ("marcus", "I'll walk it with their site manager on Thursday."),
            ("sanjay", "Please ask them about dust too. Last time the massage rooms smelled of plaster for a week."),
        )),
        Sitting(72, (
            ("marcus", "Survey done. The drain under the steam room is cast iron and cracked in two places, so it "
                       "has to be replaced, not patched."),
            ("rachel", "What does that do to the schedule and the cost?"),
            ("marcus", "Halden estimate ten extra days and £14,200. I've asked for a fixed price so it doesn't creep."),
            ("sanjay", "Ten more days without the steam room means cancelling the Wellness Weekend packages in "
                       "September."),
            ("rachel", "Don't cancel anything yet. Let me see if the owners release the contingency first."),
            ("marcus", "The contingency is £20,000, so the drain would eat most of it."),
        )),
        Sitting(63, (
            ("rachel", "The owners approved the drain work from the contingency, on condition that we don't touch "
                       "the rest of it without asking."),
            ("sanjay", "Good news. For the weekend packages, I can move the steam sessions to the hammam at the "
                       "Linden Baths across the road; they'd charge us £18 a guest."),
            ("rachel", "That's fine for September. Make sure guests are told before they arrive, not at the desk."),
            ("marcus", "Halden start on Monday. The changing rooms get stripped first, so the lockers are out of use "
                       "from the 8th."),
            ("sanjay", "Then guests can change in rooms 114 and 115 before their treatments. I'll put robes and "
                       "slippers there."),
            ("rachel", "Use 114 and 115, but block them in the system so front office doesn't sell them."),
        )),
        Sitting(55, (
            ("sanjay", "We had three complaints about noise this week, all from the first floor above the spa."),
            ("marcus", "That's the floor grinding for the drain. It should be finished by Wednesday."),
            ("rachel", "Until then, no drilling before 10am or after 5pm. I'll tell Halden myself."),
            ("sanjay", "Could we offer the affected rooms something? A free treatment would cost us very little."),
            ("rachel", "Yes, a 30-minute massage for each of the three rooms, and a note from me."),
            ("marcus", "I'll also fit acoustic mats on the stairwell door, it carries a lot of the noise up."),
        )),
        Sitting(41, (
            ("marcus", "Bad news: the slate for the changing room floor is delayed six weeks at the quarry."),
            ("sanjay", "Six weeks would push the reopening into November. Is there anything in stock?"),
            ("marcus", "Halden can get a grey porcelain with the same slip rating next week, about £2,100 cheaper."),
            ("rachel", "I'd rather open on time than wait for slate nobody will notice. Go with the porcelain, and "
                       "cancel the slate order if we can do it without a penalty."),
            ("marcus", "The supplier allows cancellation with a 10% fee, roughly £900."),
            ("sanjay", "Still cheaper overall. I'll tell the team the reopening date holds."),
        )),
        Sitting(24, (
            ("sanjay", "The steam room is tested and the new sauna heater is in. We're ready to reopen on the 2nd."),
            ("marcus", "The snagging list is down to eleven items, mostly grout and two lockers that don't lock."),
            ("rachel", "I want a soft opening for staff on the Friday before, so we find problems before guests do."),
            ("sanjay", "I'll run it: two hours on Friday afternoon, and each therapist tries the steam room and the "
                       "showers."),
            ("marcus", "Halden's final invoice came in £4,300 over the original quote, which matches the drain and "
                       "the porcelain swap."),
            ("rachel", "Send it to me with the breakdown and I'll sign it off before the owners' meeting."),
        )),
    )),
    Dialogue("gh_espresso_lease", "grand-hotel", "Brewline espresso machines: service dispute", "en", (
        Person("lydia", "Lydia Ferraro"),
        Person("owen", "Owen Pryce"),
    ), (
        Sitting(66, (
            ("owen", "The lobby bar espresso machine died again during breakfast, third time this month. We served "
                     "filter coffee to a queue of forty people."),
            ("lydia", "Brewline's lease includes a four-hour response. Did you log a ticket with them?"),
            ("owen", "Logged at 7:10, the technician turned up at 15:30. By then breakfast was long over."),
            ("lydia", "That's more than eight hours. Send me the ticket numbers for all three call-outs and I'll "
                      "check them against the contract."),
            ("owen", "BL-20931, BL-21004 and BL-21177. The last one was the grinder, the other two the boiler "
                     "pressure."),
            ("lydia", "Thanks. I'll write to their account manager today."),
        )),
        Sitting(59, (
            ("lydia", "Brewline replied. They say the response time counts from when a ticket is 'confirmed', not "
                      "logged, and they confirmed yours at noon."),
            ("owen", "That's nonsense, nobody confirmed anything. I got an automatic email at 7:11 and then silence."),
            ("lydia", "The contract doesn't define 'confirmed' anywhere, so I'm pushing back. Clause 6 just says four "
                      "hours from notification."),
            ("owen", "Meanwhile can we get a backup machine? Even a small one for the bar would save breakfast."),
            ("lydia", "I asked. They'll lend us a backup machine for free while the dispute is open, but only if we "
                      "collect it from their depot."),
            ("owen", "I'll send a porter with the van on Tuesday."),
        )),
        Sitting(50, (
            ("owen", "It broke again on Saturday, the boiler pressure again. The backup saved us, but it only pulls "
                     "about sixty shots an hour."),
            ("lydia", "The same fault three times is a pattern, not bad luck. I've asked Brewline to replace the "
                      "machine instead of repairing it."),
            ("owen", "Their technician told me off the record that this model has a known problem with the pressure "
                     "valve."),
            ("lydia", "Useful, a known valve problem is exactly what I need. Can you put that in an email to me, with "
                      "his name and the date?"),
            ("owen", "Will do tonight. His name's Declan, he's been out four times now."),
            ("lydia", "And keep a log of every failure from now on: date, time, what broke, and how long we were "
                      "without."),
        )),
        Sitting(38, (
            ("lydia", "Brewline sent an invoice for £640 in call-out fees for the last three visits."),
            ("owen", "Call-outs are supposed to be included in the lease. Why is there an invoice at all?"),
            ("lydia", "They are included, for faults. They're claiming the grinder visit was 'user damage' from "
                      "cleaning it with water."),
            ("owen", "We clean it with the brush and the tablets they supplied. I've got photos of the cleaning kit "
                     "and the training sheet they left us."),
            ("lydia", "Perfect, send them over. I'm not paying that invoice, and I'm holding back this month's lease "
                      "payment until they withdraw it."),
            ("owen", "Won't they take the machines back if we don't pay?"),
            ("lydia", "Not while we're in a formal dispute, clause 11 says so."),
        )),
        Sitting(22, (
            ("lydia", "Good news: Brewline withdrew the £640 and will swap the lobby machine for their newer model, "
                      "the Corsa 3, at no cost."),
            ("owen", "Finally. When does it arrive? I need people trained before the weekend."),
            ("lydia", "Thursday at 6am, before breakfast, and their trainer stays until eleven to show the baristas."),
            ("owen", "I'll roster both morning baristas and the supervisor so everyone gets the training."),
            ("lydia", "I also negotiated a credit of two months' lease, £780, for the downtime."),
            ("owen", "That pays for a new set of cups at least. Thanks for sticking with it."),
        )),
        Sitting(9, (
            ("owen", "The Corsa 3 has been running for ten days without a hiccup. Shots are faster too, the morning "
                     "queue is half what it was."),
            ("lydia", "Great. The lease renewal comes up in March; I'll get quotes from two other suppliers anyway, "
                      "so we have leverage."),
            ("owen", "Ask them about response times first. I'd sign with anyone who actually shows up within four "
                     "hours."),
            ("lydia", "I'll put a penalty in the new contract: a service credit for every hour over the response "
                      "time."),
            ("owen", "And we keep the backup machine from Brewline until then?"),
            ("lydia", "They agreed to leave it with us until the renewal, so yes."),
        )),
    )),
    # ================================================================== grand-hotel, French
    Dialogue("gh_fr_mariage", "grand-hotel", "Mariage Delorme–Benali (20 septembre)", "fr", (
        Person("camille", "Camille Rousseau"),
        Person("julien", "Julien Marchand"),
        Person("nadia", "Nadia Ferhat"),
    ), (
        Sitting(84, (
            ("camille", "Bonne nouvelle : les Delorme ont signé pour le mariage du 20 septembre. 110 invités, "
                        "cocktail dans le jardin et dîner dans le salon des Lilas."),
            ("julien", "Super. Ils ont déjà une idée du menu ou on part de zéro ?"),
            ("camille", "La mariée veut quelque chose de léger, beaucoup de poisson, et le marié tient absolument à "
                        "un plateau de fromages."),
            ("nadia", "Côté chambres, on en bloque combien ? Ce week-end-là, on est déjà rempli à 80 %."),
            ("camille", "Ils parlent d'une quarantaine de chambres pour les familles, surtout le vendredi et le "
                        "samedi."),
            ("nadia", "Je peux en garantir trente au tarif groupe. Au-delà, ce sera le plein tarif."),
            ("camille", "Je leur propose trente, avec une date limite de réservation au 1er août."),
        )),
        Sitting(76, (
            ("julien", "J'ai préparé deux menus pour la dégustation : bar en croûte de sel ou dos de cabillaud au "
                       "beurre blanc, et en dessert pièce montée ou fraisier."),
            ("camille", "La dégustation est fixée au jeudi 12 à 15 h, ils viendront à quatre avec les parents."),
            ("nadia", "Ils m'ont aussi demandé si les témoins pouvaient avoir une chambre la veille pour préparer la "
                      "salle."),
            ("camille", "Oui, mets deux chambres le vendredi sur le bloc du mariage."),
            ("julien", "Pour le fromage, je travaille avec la fromagerie Vial, ils peuvent faire un plateau pour 110 "
                       "sans problème."),
            ("camille", "Parfait, ajoute-le au devis en option, à 9 € par personne."),
        )),
        Sitting(68, (
            ("camille", "La dégustation s'est très bien passée. Ils prennent le cabillaud au beurre blanc et le "
                        "fraisier."),
            ("julien", "Et le vin ? Le sommelier propose un sancerre blanc et un saint-émilion, mais ils voulaient "
                       "aussi du champagne pour le toast."),
            ("camille", "Le père de la mariée veut apporter son propre champagne, une cuvée de sa région."),
            ("julien", "Dans ce cas, on facture un droit de bouchon. D'habitude c'est 15 € la bouteille, on peut "
                       "descendre à 10 € pour un mariage."),
            ("nadia", "Attention, il faut aussi que les bouteilles arrivent la veille pour être mises au frais."),
            ("camille", "Je leur écris : droit de bouchon à 10 €, livraison le vendredi avant midi."),
        )),
        Sitting(53, (
            ("nadia", "Les réservations du bloc avancent : 24 chambres sur 30, et trois familles demandent des lits "
                      "d'appoint."),
            ("camille", "Les lits d'appoint, ce n'est possible que dans les supérieures, non ?"),
            ("nadia", "Oui, les chambres standard sont trop petites. Je surclasse les trois familles en supérieure "
                      "au même tarif, on a de la place."),
            ("julien", "Question pratique : les enfants mangent quoi ? On m'a parlé d'une quinzaine d'enfants."),
            ("camille", "Menu enfant à 25 € : jus, suprême de volaille, frites maison et une glace. Ils dîneront dans "
                        "la salle d'à côté avec deux animatrices."),
            ("julien", "Ça me va, je prévois une cuisinière rien que pour les enfants."),
        )),
        Sitting(39, (
            ("camille", "Petit souci : la mariée voudrait un feu d'artifice dans le jardin à minuit."),
            ("nadia", "Impossible, la préfecture l'interdit en centre-ville et le voisinage se plaindrait. On l'a "
                      "déjà refusé l'an dernier."),
            ("camille", "C'est ce que je pensais. On pourrait proposer des lanternes ou un jeu de lumières dans le "
                        "jardin ?"),
            ("julien", "Ou un gâteau avec des fontaines à étincelles au moment du dessert, ça fait toujours son effet."),
            ("nadia", "Les fontaines froides passent en intérieur : pas de flamme, la sécurité les a déjà validées."),
            ("camille", "Je propose les fontaines froides sur le fraisier et des guirlandes lumineuses dans les "
                        "arbres du jardin."),
        )),
        Sitting(26, (
            ("camille", "L'acompte de 30 % est arrivé hier, soit 8 400 €. Le solde est dû huit jours avant le "
                        "mariage."),
            ("nadia", "Le bloc est complet, 30 chambres sur 30. J'ai mis les cinq dernières demandes en liste "
                      "d'attente."),
            ("julien", "Il me faut le nombre définitif de couverts au plus tard le 10 septembre, et la liste des "
                       "allergies."),
            ("camille", "Ils ont déjà signalé une allergie aux fruits à coque et deux invités qui mangent sans "
                        "gluten."),
            ("julien", "Pour le sans gluten, je pensais à un fraisier sur biscuit aux amandes... ah non, pas "
                       "d'amandes avec cette allergie. Ce sera un biscuit à la farine de riz."),
            ("nadia", "Je préviens aussi l'équipe du petit-déjeuner : un brunch pour les familles est prévu le "
                      "dimanche à 11 h."),
        )),
    )),
    # ================================================================== grand-hotel, German
    Dialogue("gh_de_empfangsleitung", "grand-hotel", "Nachfolge Empfangsleitung", "de", (
        Person("katrin", "Katrin Vogt"),
        Person("lukas", "Lukas Brandt"),
        Person("jana", "Jana Hoffmann"),
    ), (
        Sitting(70, (
            ("jana", "Wie besprochen wechsle ich zum 1. Oktober in unser Schwesterhotel nach Hamburg. Wir sollten "
                     "meine Nachfolge bald ausschreiben."),
            ("lukas", "Danke, dass du so früh Bescheid gibst. Intern sehe ich ehrlich gesagt niemanden, der die "
                      "Empfangsleitung sofort übernehmen kann."),
            ("katrin", "Dann schreibe ich die Stelle extern aus, auf unserer Karriereseite und bei Hotelcareer. "
                       "Gehaltsrahmen wie bisher?"),
            ("lukas", "Bis 4.200 Euro brutto im Monat, bei viel Erfahrung auch etwas mehr. Wichtig sind "
                      "Opera-Kenntnisse und verhandlungssicheres Englisch."),
            ("jana", "Bitte auch Erfahrung mit Dienstplänen reinschreiben. Das Team hat zwölf Leute im "
                     "Dreischichtbetrieb, inklusive Nachtschicht."),
            ("katrin", "Notiert. Die Anzeige geht am Montag online, Bewerbungsschluss ist in drei Wochen."),
        )),
        Sitting(61, (
            ("katrin", "Bisher 23 Bewerbungen. Sechs habe ich in die engere Wahl genommen, die Unterlagen liegen im "
                       "gemeinsamen Ordner."),
            ("jana", "Hab sie durchgesehen. Frau Özdemir und Herr Kessler gefallen mir am besten, beide haben schon "
                     "einen Empfang geleitet."),
            ("lukas", "Herr Kessler kommt aus der Kettenhotellerie, Häuser mit 300 Zimmern. Passt das zu uns mit 140?"),
            ("jana", "Gerade deshalb: Er kennt Revenue-Prozesse, die uns fehlen. Frau Özdemir ist dafür stärker im "
                     "Gästekontakt."),
            ("katrin", "Ich lade beide und noch Frau Lindner zu einem ersten Gespräch ein. Passt euch Donnerstag "
                       "nächste Woche?"),
            ("lukas", "Donnerstag geht, aber nur vormittags. Nachmittags bin ich beim Eigentümer."),
        )),
        Sitting(52, (
            ("lukas", "Meine Eindrücke von gestern: Frau Lindner war sympathisch, aber ihr fehlt Führungserfahrung."),
            ("jana", "Sehe ich genauso. Herr Kessler war sehr strukturiert, hat aber kaum Fragen zum Team gestellt."),
            ("katrin", "Frau Özdemir hat als Einzige gefragt, wie die Nachtschicht organisiert ist und wie "
                       "Überstunden ausgeglichen werden. Das fand ich stark."),
            ("lukas", "Ich schlage einen Probetag für Frau Özdemir und Herrn Kessler vor, jeweils eine Frühschicht "
                      "am Empfang mit Jana."),
            ("jana", "Gerne. Am besten an einem Tag mit vielen Anreisen, dann sehen wir, wie sie mit Druck umgehen."),
            ("katrin", "Ich plane Dienstag für Herrn Kessler und Freitag für Frau Özdemir, beide bekommen 150 Euro "
                       "Aufwandsentschädigung."),
        )),
        Sitting(44, (
            ("jana", "Der Probetag mit Herrn Kessler war ordentlich. Als die Gruppe aus Lyon gleichzeitig "
                     "eincheckte, hat er aber sofort selbst am Computer gearbeitet, statt das Team einzuteilen."),
            ("lukas", "Und Frau Özdemir?"),
            ("jana", "Sie ist bei der Beschwerde aus Zimmer 208 ruhig geblieben und hat gleich eine Kollegin für "
                     "die Schlüsselausgabe eingeteilt. Das Team mochte sie sofort."),
            ("katrin", "Ihre Referenzen sind auch sehr gut, ihr letzter Chef in München hat sie ausdrücklich für die "
                       "Einarbeitung neuer Leute gelobt."),
            ("lukas", "Dann ist die Sache für mich klar: Wir bieten Frau Özdemir die Stelle an, mit 4.350 Euro "
                      "brutto und sechs Monaten Probezeit."),
            ("katrin", "Ich rufe sie heute Nachmittag an und schicke danach den Vertrag."),
            ("jana", "Und Herrn Kessler sagen wir bitte persönlich ab, nicht nur per Mail. Er hat sich viel Mühe "
                     "gegeben."),
        )),
        Sitting(33, (
            ("katrin", "Frau Özdemir hat zugesagt, möchte aber erst am 15. Oktober anfangen, weil ihre "
                       "Kündigungsfrist länger ist."),
            ("jana", "Dann gibt es zwei Wochen ohne Leitung. Wer übernimmt in der Zeit die Dienstpläne?"),
            ("lukas", "Die Stellvertreterin, Frau Braun. Ich spreche mit ihr, und sie bekommt für die Zeit eine "
                      "Zulage."),
            ("jana", "Ich kann die Dienstpläne für Oktober noch vorbereiten, bevor ich nach Hamburg gehe."),
            ("katrin", "Das wäre eine große Hilfe. Ich kläre mit der Lohnbuchhaltung die Zulage für Frau Braun, 300 "
                       "Euro für den halben Monat."),
            ("lukas", "Einverstanden, so machen wir es."),
        )),
        Sitting(14, (
            ("jana", "Ich habe für Frau Özdemir eine Übergabemappe angelegt: Lieferanten, offene Beschwerden, "
                     "Stammgäste und laufende Verträge."),
            ("katrin", "Danke. Ihr Einarbeitungsplan steht: erste Woche mit Frau Braun, dann je ein Tag in "
                       "Housekeeping, Reservierung und Revenue."),
            ("lukas", "Bitte plant in der ersten Woche auch einen Termin mit mir ein, ich möchte mit ihr die Ziele "
                      "für das erste Quartal besprechen."),
            ("jana", "Die Passwörter würde ich ihr übrigens nicht auf Papier geben, sondern von der IT neu vergeben "
                     "lassen."),
            ("katrin", "Richtig, das läuft über das Ticketsystem. Ich beantrage die Zugänge heute noch."),
            ("lukas", "Und organisiert bitte am 30. September einen kleinen Abschied für Jana, mit dem ganzen Team."),
        )),
    )),
    # ================================================================== grand-hotel, Spanish
    Dialogue("gh_es_proveedor_pescado", "grand-hotel", "Cambio de proveedor de pescado", "es", (
        Person("lucia", "Lucía Navarro"),
        Person("andres", "Andrés Molina"),
        Person("marta", "Marta Ruiz"),
    ), (
        Sitting(57, (
            ("andres", "Otra vez nos ha llegado la merluza de Pescados Arrieta con el hielo derretido. He tenido que "
                       "tirarla entera, doce kilos."),
            ("lucia", "¿Has hecho fotos? Con esta van cuatro entregas en mal estado desde junio."),
            ("andres", "Sí, fotos y temperatura: 9 grados al abrir la caja, cuando tendría que llegar por debajo "
                       "de 4."),
            ("marta", "Cuatro incidencias en tres meses es demasiado. Lucía, ¿podemos cambiar de proveedor sin "
                      "romper el contrato?"),
            ("lucia", "El contrato con Arrieta se renueva el 30 de noviembre y se puede rescindir con un mes de "
                      "preaviso. Tenemos margen."),
            ("marta", "Pues empieza a pedir presupuestos. Quiero al menos dos alternativas antes de final de mes."),
        )),
        Sitting(49, (
            ("lucia", "Tengo dos ofertas: Mariscos del Cantábrico, un 8 % más caro que Arrieta, y Lonja Sur, más o "
                      "menos al mismo precio."),
            ("andres", "Lonja Sur trabaja mucho con restaurantes del centro, pero me han dicho que fallan con los "
                       "pedidos del domingo."),
            ("marta", "El domingo es el brunch, no podemos quedarnos sin pescado ese día."),
            ("lucia", "Se lo pregunto directamente. También les he pedido una semana de prueba antes de firmar nada."),
            ("andres", "Con una semana de prueba me quedo más tranquilo. Quiero ver el género, no solo el precio."),
            ("marta", "De acuerdo. Prueba con los dos, una semana cada uno, y luego comparamos con números."),
        )),
        Sitting(38, (
            ("andres", "Terminada la semana de Mariscos del Cantábrico. Todo llegó a 2 grados, bien fileteado y "
                       "siempre antes de las siete."),
            ("lucia", "Y facturaron exactamente lo pedido, sin redondeos. Con Arrieta siempre aparecía algún kilo de "
                      "más."),
            ("marta", "¿Y el 8 % de diferencia? En un año son unos 6.000 euros."),
            ("andres", "Yo tiraba casi eso en producto estropeado. Con lo que perdimos en merluza este verano, sale a "
                       "cuenta."),
            ("lucia", "Ahora le toca a Lonja Sur. Empiezan el lunes."),
            ("marta", "Perfecto. Andrés, apunta las mermas de cada día para poder comparar."),
        )),
        Sitting(29, (
            ("lucia", "Lonja Sur ha fallado el domingo, como temíamos. El pedido llegó a las once, con el brunch ya "
                      "empezado."),
            ("andres", "Tuve que sacar bacalao congelado y cambiar la carta en el último momento. Los camareros ni "
                       "sabían qué ofrecer."),
            ("marta", "Entonces está claro. Nos quedamos con Mariscos del Cantábrico, con la condición de fijar el "
                      "precio un año entero."),
            ("lucia", "Se lo propongo mañana. Creo que aceptarán si firmamos por dos años."),
            ("andres", "Y que nos traigan marisco vivo los viernes para la parrillada, eso Arrieta nunca lo hizo "
                       "bien."),
            ("lucia", "Lo incluyo en el pliego. Y esta semana le mando a Arrieta el preaviso por burofax."),
        )),
        Sitting(18, (
            ("lucia", "Firmado con Mariscos del Cantábrico: precio fijo durante dos años y marisco vivo los viernes "
                      "antes de las diez."),
            ("marta", "¿Y Arrieta? ¿Ha protestado por la rescisión?"),
            ("lucia", "Reclama 1.200 euros de una factura de octubre, pero incluye la merluza que tiramos. Solo voy "
                      "a pagar la parte que llegó en buen estado."),
            ("andres", "Si hace falta, tengo las fotos de las cajas y las temperaturas de cada entrega."),
            ("marta", "Mándaselas a Lucía. Si insisten, lo pasamos a la asesoría jurídica."),
            ("andres", "Mañana te las reenvío todas, Lucía."),
        )),
        Sitting(6, (
            ("andres", "Primera semana con el proveedor nuevo: ni una caja rechazada y las mermas han bajado a la "
                       "mitad."),
            ("marta", "Buen trabajo, equipo. Quiero ver el efecto en el coste de comida del mes que viene."),
            ("lucia", "Arrieta ha aceptado cobrar solo 740 euros. Cerramos el tema sin abogados."),
            ("andres", "Me alegro. Y con el marisco vivo de los viernes la parrillada vuelve a llenarse."),
            ("marta", "Entonces lo anunciamos en la carta de otoño como pescado de lonja del día."),
        )),
    )),
    # ================================================================== acme, English
    Dialogue("acme_notification_backlog", "acme", "INC-740116 follow-up: notification queue backlog", "en", (
        Person("tom", "Tom Whitaker"),
        Person("jess", "Jess Morgan"),
        Person("kenji", "Kenji Mori"),
    ), (
        Sitting(47, (
            ("tom", "Postmortem for INC-740116 is up. Short version: the email provider had a 40-minute outage, our "
                    "workers retried every failed send immediately, and the notification queue grew to 2.3 million "
                    "messages."),
            ("jess", "The retries were the real problem. Every worker hammered the provider in a tight loop, so when "
                     "it came back we got rate-limited for another hour."),
            ("kenji", "From the customer side: 212 tickets, mostly 'where are my alerts' and 'I never got the invoice "
                      "email'. Three enterprise tenants escalated."),
            ("tom", "Proposed action items: exponential backoff with jitter on retries, an alert on queue depth, and "
                    "a runbook for draining the queue."),
            ("jess", "I'll own the backoff change. It's a small diff in the sender, but I want a load test before it "
                     "ships."),
            ("kenji", "Can we also get a status page template for provider outages? We improvised the wording and it "
                      "showed."),
        )),
        Sitting(40, (
            ("jess", "Backoff PR is up: base delay 2 seconds, doubling up to 5 minutes, with full jitter. Max 8 "
                     "attempts, then the message goes to the dead-letter queue."),
            ("tom", "Eight attempts with a 5-minute cap is about 15 minutes of retrying. Is that enough for a "
                    "40-minute outage?"),
            ("jess", "No, but the dead-letter queue is replayed automatically every 30 minutes, so nothing is lost."),
            ("tom", "Fine by me. For the alert, I'm thinking queue depth over 50,000 for 10 minutes pages on-call."),
            ("kenji", "Could support get a heads-up too? A Slack message in #support when that alert fires would "
                      "save us an hour."),
            ("tom", "Sure, I'll route a copy to #support without paging anyone there."),
        )),
        Sitting(33, (
            ("kenji", "The three enterprise tenants want a written incident report and ask whether they're owed a "
                      "service credit."),
            ("tom", "The SLA covers API availability, not email delivery times, so strictly speaking no credit is "
                    "due."),
            ("jess", "Strictly speaking, maybe. But Harbourline Logistics missed shipment confirmations for half a "
                     "day, and that will come up at their renewal."),
            ("kenji", "Their account manager suggested 10% off next month as a goodwill gesture, outside the SLA."),
            ("tom", "I'm fine with goodwill if sales signs it off, as long as we don't call it an SLA credit in "
                    "writing."),
            ("kenji", "Understood. I'll draft the report and have sales approve the discount wording before it goes "
                      "out."),
        )),
        Sitting(26, (
            ("jess", "Load test results: with the provider returning 503s, the backoff keeps our outbound rate under "
                     "200 requests a second, down from 9,000."),
            ("tom", "That's the number I wanted to see. Ship it behind the config switch and turn it on for 10% of "
                    "workers first."),
            ("jess", "Already done. If nothing odd shows up by Thursday, I'll roll it out to all workers."),
            ("kenji", "The report went out to the three tenants yesterday. Harbourline replied that they appreciated "
                      "the detail."),
            ("tom", "Good. The runbook is the last open item, and it's mine."),
            ("jess", "Put the command for replaying the dead-letter queue near the top. Nobody finds it at 3am "
                     "otherwise."),
        )),
        Sitting(15, (
            ("tom", "Runbook for draining the notification queue is merged: how to pause producers, scale workers "
                    "to 40, and replay the dead-letter queue."),
            ("kenji", "I read it as someone who isn't an engineer and could follow it. Could it link the status page "
                      "template?"),
            ("tom", "Linked now, under 'Communicating'. The template has placeholders for the provider name and the "
                    "expected delay."),
            ("jess", "The backoff has been on all workers for a week. During Tuesday's small provider blip the queue "
                     "peaked at 18,000 and drained by itself."),
            ("kenji", "And zero tickets from customers about it. That's the best outcome we could ask for."),
            ("tom", "Then I'm closing the postmortem action items. Thanks both."),
        )),
        Sitting(4, (
            ("kenji", "Harbourline renewed for two years. Their ops lead mentioned the incident report on the call, "
                      "in a good way."),
            ("jess", "Nice. I want to run a game day next quarter where we kill the email provider on purpose and "
                     "watch the queue."),
            ("tom", "Count me in. Let's do it on staging first, then production in a quiet window."),
            ("kenji", "If you do it in production, warn support the day before so we don't panic at the alert."),
            ("jess", "Deal. I'll put a draft plan in the team doc by the end of the month."),
        )),
    )),
    Dialogue("acme_platform_hire", "acme", "Hiring: second platform engineer", "en", (
        Person("priya", "Priya Desai"),
        Person("marcus", "Marcus Bell"),
        Person("hannah", "Hannah Lowe"),
    ), (
        Sitting(88, (
            ("priya", "Headcount for the second platform engineer is approved. I'd like someone who has run "
                      "Kubernetes in production, not just deployed to it."),
            ("hannah", "Great. What's the salary band? And are we open to fully remote, or hybrid around the Dublin "
                       "office?"),
            ("priya", "The band is €75k to €90k. Remote within two hours of our time zone, with a week on-site each "
                      "quarter."),
            ("marcus", "Please, no leetcode rounds. Last time we lost two good candidates who found it insulting."),
            ("hannah", "What would you use instead?"),
            ("marcus", "A 90-minute pairing session on a real broken deployment in a sandbox cluster. It shows how "
                       "people debug, which is the job."),
            ("priya", "Let's try it. Marcus, can you build the sandbox before the first interviews?"),
        )),
        Sitting(80, (
            ("hannah", "The posting has been live for a week: 64 applicants, and I've screened it down to nine for a "
                       "first call."),
            ("marcus", "The sandbox is ready: a deployment that crashloops because of a wrong config map, and a "
                       "readiness probe on the wrong port."),
            ("priya", "Nice, two bugs of different difficulty. How long did it take you to fix it cold?"),
            ("marcus", "Twelve minutes, but I wrote it. I asked Lena from the data team to try it blind and she took "
                       "40."),
            ("hannah", "So 90 minutes leaves room for talking. I'll book the screening calls for next week."),
            ("priya", "I'll do the first calls myself; 30 minutes each, with a focus on on-call experience."),
        )),
        Sitting(71, (
            ("priya", "Out of nine calls, four are worth a pairing session: Rui, Olumide, Beth and Kasia."),
            ("hannah", "Olumide has another offer with a deadline in ten days, so we should pair with him first."),
            ("marcus", "I can do Monday and Wednesday afternoons this week and next."),
            ("hannah", "Then Olumide on Monday, Rui and Beth on Wednesday, and Kasia the Monday after."),
            ("priya", "Please send each of them the sandbox README the day before, so the session isn't spent on "
                      "setup."),
            ("marcus", "Good call. I'll also record the terminal, with their permission, so we can compare "
                       "afterwards."),
        )),
        Sitting(63, (
            ("marcus", "Olumide found the probe bug in eight minutes and the config map in twenty, talking through "
                       "everything. Strongest session I've seen."),
            ("priya", "Rui was solid too, but quiet; I had to pull the reasoning out of him."),
            ("marcus", "Beth struggled with kubectl but asked excellent questions. More of a developer than an "
                       "operator."),
            ("hannah", "Kasia withdrew this morning, she accepted a job at a bank."),
            ("priya", "Then it's between Olumide and Rui, and his deadline decides the order. Let's do the final "
                      "round with Olumide on Thursday."),
            ("hannah", "I'll book Thursday with you and the CTO, 45 minutes."),
        )),
        Sitting(55, (
            ("priya", "The CTO loved Olumide. I'd like to make an offer today."),
            ("hannah", "His current salary is €84k and the other offer is €88k. He told me he'd prefer us if we're "
                       "close."),
            ("priya", "Offer €89k, plus the standard €2k home office budget. Start date as early as he can manage."),
            ("marcus", "And let's give him a proper onboarding buddy. I'm happy to do it."),
            ("hannah", "I'll call him this afternoon and send the written offer straight after."),
            ("priya", "For Rui, ask if he'd like to stay in touch. If a third role is funded in Q3, he's first on my "
                      "list."),
        )),
        Sitting(41, (
            ("hannah", "Olumide signed! He starts on the 1st, after a three-week notice period."),
            ("marcus", "I've drafted his first two weeks: access setup, shadowing on-call, then a real ticket from "
                       "the backlog."),
            ("priya", "Let's keep him off the on-call rotation until his second month."),
            ("hannah", "The laptop is ordered and his accounts request is in. The hardware arrives on the 28th."),
            ("marcus", "I have a good first ticket: our staging cluster still runs an old ingress controller that "
                       "needs replacing."),
            ("priya", "Perfect, small but real. And I'll send Rui a note today, as promised."),
        )),
        Sitting(12, (
            ("marcus", "Olumide's first week went well. He already spotted that our staging alerts go to a channel "
                       "nobody reads."),
            ("priya", "Ha, I've been meaning to fix that for months. Let him own it."),
            ("hannah", "Quick retro on the process: time to hire was 38 days, the fastest we've had for an "
                       "engineering role."),
            ("marcus", "The pairing session made the difference. Three candidates told Hannah it was the best "
                       "interview they'd done."),
            ("hannah", "I'll write the pairing format into our interview guide so other teams can reuse it."),
            ("priya", "Please do. And let's use the same sandbox for the SRE role next year."),
        )),
    )),
    Dialogue("acme_ci_actions", "acme", "Moving CI from Jenkins to GitHub Actions", "en", (
        Person("nadia", "Nadia Karimi"),
        Person("ben", "Ben Ashworth"),
        Person("lena", "Lena Hartmann"),
    ), (
        Sitting(75, (
            ("nadia", "The Jenkins box needs a major upgrade by the end of the quarter, and half our plugins are "
                      "abandoned. I'd rather move CI to GitHub Actions than patch it again."),
            ("ben", "I'm all for it. Our builds take 22 minutes on Jenkins and most of that is waiting for a free "
                    "executor."),
            ("lena", "My worry is the integration test suite. It needs Postgres and Redis, and it's flaky enough "
                     "already."),
            ("nadia", "Actions can run both as service containers. We'd pilot with one repo first, probably the "
                      "billing service."),
            ("ben", "Billing is a good pick, it has the slowest pipeline and the fewest weird plugins."),
            ("lena", "Fine, as long as we compare flaky test rates before and after, not just speed."),
        )),
        Sitting(67, (
            ("nadia", "The pilot workflow for billing runs on hosted runners. A cold build takes 14 minutes, and "
                      "with dependency caching it drops to 9."),
            ("ben", "Nine minutes from push to green. That alone sells it to the team."),
            ("lena", "Integration tests passed 48 out of 50 runs. The same two tests fail as on Jenkins, so at least "
                     "the flakiness didn't get worse."),
            ("nadia", "Cost estimate at our volume: around $1,100 a month on hosted runners, against roughly $700 "
                      "for the Jenkins VMs."),
            ("ben", "Could we run our own runners on the spare build machines instead?"),
            ("nadia", "We could, but then we're back to patching machines, which is exactly what we're trying to "
                      "stop doing."),
        )),
        Sitting(58, (
            ("lena", "I fixed one of the two flaky tests: it depended on the order Postgres returns rows without an "
                     "ORDER BY."),
            ("ben", "The other one is mine, the retry test in the mailer. It uses a real sleep and times out on slow "
                    "runners."),
            ("lena", "Swap the sleep for a fake clock and it'll be deterministic."),
            ("nadia", "Meanwhile, secrets: Jenkins holds 31 credentials. I'm moving them to GitHub environments and "
                      "dropping the ones nobody uses."),
            ("ben", "How many are actually used?"),
            ("nadia", "Nineteen. The other twelve belong to services we shut down years ago, including an FTP "
                      "password for a partner that no longer exists."),
            ("ben", "Nice. Rotate the nineteen while you're at it, since they've been sitting in Jenkins for ages."),
        )),
        Sitting(46, (
            ("nadia", "Finance came back: they approved the hosted runners, but capped spend at $1,300 a month."),
            ("ben", "We'll hit that if every pull request runs the full matrix on three Python versions."),
            ("lena", "Run the full matrix only on the main branch and nightly. Pull requests can test just the "
                     "newest Python."),
            ("nadia", "Agreed, and cancel in-progress runs when someone pushes a new commit to the same branch. That "
                      "alone saves a lot."),
            ("ben", "I'll add the concurrency setting to the shared workflow template."),
            ("lena", "And please keep the nightly full run posting to #qa, I read it every morning."),
        )),
        Sitting(35, (
            ("ben", "All eleven services are on Actions now except the mobile backend, which needs a macOS runner "
                    "for the iOS build."),
            ("nadia", "macOS minutes cost ten times Linux ones. Let's only build iOS on release tags."),
            ("lena", "Then I want a manual trigger as well, so QA can build a test app on demand."),
            ("ben", "Manual dispatch is easy, I'll add a button with the branch as input."),
            ("nadia", "Good. Then Jenkins goes read-only on Friday, and I'll switch it off for good two weeks later."),
            ("lena", "Keep the old build logs somewhere. Audit asked for twelve months of release history last year."),
        )),
        Sitting(20, (
            ("nadia", "Jenkins is switched off. I archived the build logs of the last 18 months to cold storage, "
                      "about 40 GB."),
            ("ben", "The average pipeline is down from 22 minutes to 8. The team noticed, people merge smaller PRs "
                    "now."),
            ("lena", "The flaky rate dropped under 1% after the fake clock fix. Best numbers we've had in two years."),
            ("nadia", "Spend for the first full month was $1,040, under the finance cap."),
            ("ben", "Can we sell the old build machines or give them to the office? They're only three years old."),
            ("nadia", "IT wants two of them as spare desktops; the rest go to the recycling partner with wiped disks."),
        )),
    )),
    # ================================================================== acme, French
    Dialogue("acme_fr_salon", "acme", "Stand au salon Cloud & DevOps Paris", "fr", (
        Person("camille", "Camille Girard"),
        Person("hugo", "Hugo Lambert"),
        Person("elodie", "Élodie Marchetti"),
    ), (
        Sitting(86, (
            ("camille", "On a enfin la confirmation : stand de 12 m² au salon Cloud & DevOps, porte de Versailles, "
                        "les 14 et 15 novembre."),
            ("hugo", "Super. On est placés où ? L'an dernier on était au fond du hall, personne ne passait."),
            ("camille", "Hall 4, allée B, juste à côté de l'espace conférences. C'est un des meilleurs emplacements "
                        "qui restaient."),
            ("elodie", "Est-ce qu'on aura une démo en direct ? Les visiteurs s'arrêtent beaucoup plus devant un "
                       "écran qui bouge."),
            ("hugo", "Il nous faut surtout un coin pour discuter avec les prospects, au calme, avec deux tabourets."),
            ("camille", "On peut faire les deux : un grand écran pour la démo et un petit comptoir au fond pour les "
                        "rendez-vous avec les prospects."),
        )),
        Sitting(78, (
            ("elodie", "Pour la démo, je propose de montrer un incident simulé de bout en bout : l'alerte, le "
                       "diagnostic et la résolution en cinq minutes."),
            ("hugo", "Cinq minutes, c'est long sur un salon. Les gens restent deux minutes, pas plus."),
            ("elodie", "Alors une boucle de deux minutes qui tourne en continu, et la version longue seulement quand "
                       "quelqu'un pose des questions."),
            ("camille", "Il nous faudra une connexion fiable. Le wifi du salon est toujours saturé, je commande une "
                        "ligne filaire à 390 €."),
            ("hugo", "Et une 4G de secours, on ne peut pas se permettre un écran noir devant un prospect."),
            ("elodie", "Je prépare aussi une version enregistrée de la démo, au cas où tout tomberait."),
        )),
        Sitting(69, (
            ("camille", "Budget total validé : 18 000 €, dont 9 500 pour le stand, 2 000 pour les goodies et le "
                        "reste pour les déplacements."),
            ("hugo", "Pour les goodies, pas de stylos ni de tote bags, tout le monde en donne. Des chaussettes, ça "
                     "marche toujours avec les développeurs."),
            ("elodie", "Ou des autocollants de bonne qualité. Ils ne coûtent presque rien et on les retrouve sur les "
                       "ordinateurs pendant des années."),
            ("camille", "Je prends les deux : 500 paires de chaussettes à nos couleurs et 2 000 autocollants. Je "
                        "passe commande cette semaine."),
            ("hugo", "Attention aux délais, l'an dernier les goodies sont arrivés la veille au soir."),
            ("camille", "Le fournisseur garantit une livraison au bureau le 3 novembre."),
        )),
        Sitting(55, (
            ("hugo", "J'ai déjà 14 rendez-vous calés sur le stand, dont trois grands comptes de la banque et de "
                     "l'assurance."),
            ("camille", "Bravo ! Tu peux les mettre dans l'agenda partagé, pour que tout le monde sache quand le "
                        "comptoir est occupé ?"),
            ("hugo", "C'est fait. J'aurais besoin qu'Élodie soit là pour le rendez-vous avec la Mutuelle Horizon, "
                     "ils posent toujours des questions techniques."),
            ("elodie", "Le 14 à 11 h ? Ça me va, ma conférence est à 16 h."),
            ("camille", "Ah, tu as été retenue pour une conférence ? Je ne savais pas !"),
            ("elodie", "Oui, un retour d'expérience de vingt minutes sur nos astreintes, dans la petite salle."),
        )),
        Sitting(43, (
            ("camille", "Hôtel réservé pour tout le monde à deux stations du salon : quatre chambres, deux nuits."),
            ("hugo", "On arrive la veille pour le montage ? Le hall est ouvert aux exposants à partir de 14 h le 13."),
            ("camille", "Oui, le prestataire monte la structure le matin, et nous, on installe l'écran et les goodies "
                        "l'après-midi."),
            ("elodie", "Je viendrai avec le portable de démo et un deuxième en secours, tous les deux déjà "
                       "configurés."),
            ("hugo", "Pour le dîner du 14 au soir, j'ai invité deux prospects. Je réserve une table pour six près du "
                     "salon."),
            ("camille", "Pense à garder tes notes de frais, la compta veut les justificatifs dans la semaine."),
        )),
        Sitting(30, (
            ("hugo", "Bilan du salon : 212 contacts scannés, dont 38 qualifiés, et la banque demande deux démos "
                     "approfondies."),
            ("elodie", "La boucle de deux minutes a très bien marché. Les gens s'arrêtaient dès qu'ils voyaient "
                       "l'alerte rouge."),
            ("camille", "Et la conférence d'Élodie était pleine, une trentaine de personnes debout au fond."),
            ("hugo", "Les chaussettes ont disparu en une journée. Le deuxième jour, il ne restait que les "
                     "autocollants."),
            ("camille", "Noté pour l'an prochain : 800 paires. Je fais le bilan financier d'ici vendredi."),
            ("elodie", "Je publierai les slides de ma conférence sur le blog la semaine prochaine."),
        )),
        Sitting(10, (
            ("camille", "Bilan financier : 17 200 € dépensés, soit 800 € sous le budget. Le coût par contact "
                        "qualifié tombe à environ 450 €."),
            ("hugo", "Et la banque passe en phase pilote le mois prochain. Si elle signe, le salon est remboursé dix "
                     "fois."),
            ("elodie", "L'article de blog tiré de ma conférence a fait 3 000 lectures, c'est notre meilleur de "
                       "l'année."),
            ("camille", "Alors on y retourne l'an prochain. Je demande dès maintenant le même emplacement."),
            ("hugo", "Et cette fois avec un comptoir plus grand, on a dû refuser des rendez-vous."),
        )),
    )),
    # ================================================================== acme, German
    Dialogue("acme_de_k8s_upgrade", "acme", "Kubernetes-Upgrade Produktionscluster", "de", (
        Person("lukas", "Lukas Petersen"),
        Person("sabine", "Sabine Krüger"),
        Person("emre", "Emre Yıldız"),
    ), (
        Sitting(64, (
            ("sabine", "Unser Produktionscluster läuft noch auf Kubernetes 1.27, und der Support des Anbieters dafür "
                       "endet im Dezember. Bis dahin müssen wir auf 1.30."),
            ("lukas", "Das sind drei Minor-Versionen, also drei Upgrades nacheinander. Bei der Control Plane kann "
                      "man keine Version überspringen."),
            ("emre", "Welche APIs fallen dabei weg? Ich weiß, dass unsere alten Helm-Charts noch ein paar "
                     "Beta-Ressourcen nutzen."),
            ("lukas", "Ich lasse nächste Woche einen Scan über alle Manifeste laufen, dann haben wir eine Liste."),
            ("sabine", "Gut. Bis Ende des Monats will ich einen Plan mit Wartungsfenstern, Rollback und "
                       "Kundenkommunikation."),
            ("emre", "Denkt bitte auch an die Cronjobs, die nachts laufen. Die haben beim letzten Knotenwechsel "
                     "Ärger gemacht."),
        )),
        Sitting(56, (
            ("lukas", "Der Scan ist durch: 14 Manifeste nutzen veraltete APIs, vor allem PodDisruptionBudgets und "
                      "HorizontalPodAutoscaler in alten Versionen."),
            ("emre", "Die Autoscaler gehören fast alle zu meinen Services. Ich stelle sie diese Woche auf "
                     "autoscaling/v2 um."),
            ("sabine", "Was ist mit den Komponenten von Drittanbietern, also Ingress-Controller und "
                       "Zertifikatsmanager?"),
            ("lukas", "Beide brauchen vor dem Sprung auf 1.29 neue Versionen. Den Ingress-Controller würde ich "
                      "zuerst aktualisieren, der ist am kritischsten."),
            ("sabine", "Einverstanden, aber erst in Staging, mit mindestens einer Woche Beobachtung."),
            ("emre", "Ich schreibe für Staging ein paar Lasttests, die unsere wichtigsten Endpunkte abdecken."),
        )),
        Sitting(47, (
            ("emre", "Alle Autoscaler sind auf autoscaling/v2 umgestellt und laufen in Staging seit drei Tagen ohne "
                     "Auffälligkeiten."),
            ("lukas", "Der neue Ingress-Controller hatte in Staging ein Problem: Er setzt den Header mit der "
                      "Client-IP anders, und unser Rate-Limiting hat alle Anfragen derselben IP zugeordnet."),
            ("sabine", "Das wäre in Produktion böse geworden. Wie beheben wir das?"),
            ("lukas", "Mit einer Zeile in der Konfiguration, die den alten Header wieder auswertet. In Staging "
                      "greifen die Limits damit wieder pro Client."),
            ("emre", "Meine Lasttests haben das übrigens nicht gefunden, weil alle Anfragen vom selben Rechner "
                     "kamen. Ich baue verteilte Quellen ein."),
            ("sabine", "Gute Idee. Schreibt den Header-Fall bitte ins Upgrade-Protokoll, das betrifft auch andere "
                       "Teams."),
        )),
        Sitting(38, (
            ("sabine", "Zu den Wartungsfenstern: Ich schlage drei Dienstage vor, jeweils von 22 bis 2 Uhr, für 1.28, "
                       "1.29 und 1.30."),
            ("emre", "Der zweite Dienstag ist der 28., da laufen die Abrechnungsjobs zum Monatsende. Können wir den "
                     "auf Mittwoch schieben?"),
            ("sabine", "Dann Mittwoch, der 29. Ich informiere die Kunden zwei Wochen vorher über die Statusseite und "
                       "per Mail."),
            ("lukas", "Zum Rollback: Die Control Plane lässt sich nicht zurückstufen. Deshalb bauen wir für jede "
                      "Stufe einen neuen Node-Pool und lassen den alten zwei Tage stehen."),
            ("emre", "Heißt das, wir ziehen die Pods jedes Mal komplett um?"),
            ("lukas", "Ja, Knoten für Knoten per Drain. Die PodDisruptionBudgets sorgen dafür, dass nie alle "
                      "Replikate gleichzeitig weg sind."),
        )),
        Sitting(28, (
            ("lukas", "Upgrade auf 1.28 heute Nacht erledigt: 47 Minuten, keine Fehler. Der alte Node-Pool bleibt "
                      "bis Donnerstag stehen."),
            ("emre", "Bei mir ist nur der Export-Worker einmal neu gestartet, weil er beim Drain seine laufenden Jobs "
                     "nicht sauber beendet hat."),
            ("sabine", "Ist das ein Problem für die nächsten Stufen?"),
            ("emre", "Nicht mehr: Ich habe die Grace Period auf 120 Sekunden erhöht, damit laufende Exporte fertig "
                     "werden."),
            ("lukas", "Dann bleibt es beim Plan: 1.29 am Mittwoch, dem 29."),
            ("sabine", "Sehr gut. Ich poste ein kurzes Update für die Kunden auf der Statusseite."),
        )),
        Sitting(13, (
            ("lukas", "1.30 läuft seit heute Nacht in Produktion. Alle drei Stufen ohne Auswirkungen für Kunden."),
            ("sabine", "Glückwunsch, das war sauber geplant. Die alten Node-Pools können am Freitag weg."),
            ("emre", "Das senkt auch die Kosten wieder, die doppelten Pools haben uns etwa 1.800 Euro pro Woche "
                     "gekostet."),
            ("sabine", "Nächstes Mal will ich nicht wieder so weit hinterherhinken. Ab jetzt machen wir jedes "
                       "Quartal ein Minor-Upgrade."),
            ("lukas", "Dann baue ich den API-Scan in die CI ein, damit veraltete Ressourcen gar nicht erst gemergt "
                      "werden."),
            ("emre", "Und ich schreibe eine kurze Wiki-Seite für die Teams, wie man die Grace Period richtig setzt."),
        )),
    )),
    # ================================================================== acme, Spanish
    Dialogue("acme_es_app_proveedor", "acme", "Retrasos de Nubaria con la app móvil", "es", (
        Person("marta", "Marta Ibáñez"),
        Person("diego", "Diego Ferrer"),
        Person("sergio", "Sergio Campos"),
    ), (
        Sitting(82, (
            ("marta", "Nubaria no ha entregado el segundo hito de la app móvil. Según el contrato tenía que estar el "
                      "día 15 y hoy estamos a 22."),
            ("diego", "Lo que han mandado no compila en iOS, y el login con SSO ni siquiera está empezado."),
            ("sergio", "El contrato prevé una penalización del 1 % por semana de retraso, con un máximo del 10 % del "
                       "total."),
            ("marta", "No quiero empezar con penalizaciones todavía. Primero, una reunión con su director para "
                      "entender qué está pasando."),
            ("diego", "Pídeles también acceso al repositorio completo. Ahora solo vemos lo que deciden enseñarnos."),
            ("marta", "Lo incluyo en el correo. Les propongo el jueves."),
        )),
        Sitting(74, (
            ("marta", "Reunión hecha. Dicen que dos de sus desarrolladores se fueron en verano y que ya han "
                      "contratado a otros dos."),
            ("diego", "Eso explica el código. Hay módulos enteros reescritos con otro estilo y sin pruebas."),
            ("sergio", "¿Han propuesto una fecha nueva por escrito?"),
            ("marta", "Sí: el segundo hito para el 10 del mes que viene, y la app en las tiendas a finales de enero "
                      "en lugar de diciembre."),
            ("diego", "Acepto la fecha si nos dan acceso al repositorio y una demo cada viernes. Si no, no me fío."),
            ("sergio", "Y dejemos por escrito que el nuevo calendario no supone renunciar a la penalización."),
        )),
        Sitting(61, (
            ("diego", "Tercera demo del viernes: el login con SSO ya funciona, pero las notificaciones push fallan "
                      "en Android 14."),
            ("marta", "¿Es grave? Las notificaciones son la mitad del valor de la app para nuestros clientes."),
            ("diego", "Es un permiso que Android exige desde la versión 13. Se lo he explicado y dicen que lo tienen "
                      "en dos días."),
            ("sergio", "Por cierto, nos han mandado la factura completa del segundo hito, 36.000 euros, aunque el "
                       "hito no está aceptado."),
            ("marta", "No se paga hasta que Diego firme la aceptación del hito. Así de simple."),
            ("sergio", "Entendido, la dejo retenida y les aviso de que falta el acta de aceptación."),
        )),
        Sitting(48, (
            ("diego", "Las notificaciones ya van bien, pero he encontrado algo peor: guardan el token de sesión en "
                      "texto plano en el almacenamiento del móvil."),
            ("marta", "¿Es un problema de seguridad serio?"),
            ("diego", "Sí. Cualquiera con el teléfono desbloqueado en la mano podría copiarlo. Tienen que usar el "
                      "Keychain en iOS y el Keystore en Android."),
            ("sergio", "¿Eso entra en el contrato o es trabajo extra?"),
            ("marta", "El anexo técnico exige seguir las buenas prácticas de OWASP para móviles, así que lo corrigen "
                      "sin coste."),
            ("diego", "Les mando el detalle hoy, con la referencia exacta del anexo."),
        )),
        Sitting(34, (
            ("sergio", "He calculado la penalización: tres semanas de retraso en el segundo hito, un 3 % de 120.000, "
                       "o sea 3.600 euros."),
            ("marta", "¿Y cómo la aplicamos? No quiero romper la relación ahora que por fin avanzan."),
            ("sergio", "Lo más limpio es descontarla de la factura del segundo hito cuando la aceptemos."),
            ("diego", "El hito estará listo para aceptar la semana que viene. Lo del token ya está corregido y lo he "
                      "comprobado yo mismo."),
            ("marta", "Entonces aceptamos el hito, pagamos la factura menos los 3.600 y se lo explicamos con el "
                      "cálculo delante."),
            ("sergio", "Preparo la carta con el desglose y la firmas tú, Marta."),
        )),
        Sitting(17, (
            ("marta", "Nubaria ha aceptado el descuento sin discutir. Creo que la demo semanal les ha venido bien a "
                      "ellos también."),
            ("diego", "Hito dos aceptado oficialmente. Para el tercero quiero pruebas automáticas en el repositorio "
                      "antes de cada demo."),
            ("sergio", "Queda un 40 % del contrato, 48.000 euros, que se paga con la publicación en las tiendas."),
            ("marta", "Y la publicación sigue prevista para finales de enero. Si llegan, renovamos el mantenimiento "
                      "con ellos."),
            ("diego", "Yo pondría una condición al mantenimiento: tiempo de respuesta de 24 horas para fallos "
                      "críticos."),
            ("sergio", "Lo añado al borrador del contrato de mantenimiento."),
        )),
    )),
)


QUESTIONS: tuple[Question, ...] = (
    # ------------------------------------------------------------------ gh_staff_party
    Question("Which date and place did Priya settle on?", "speaker", "gh_staff_party", 2, 4,
             "shares 'date' (also said by Helen); 'venue' is said by Tom, Helen and Priya elsewhere"),
    Question("What did Tom get changed for the vegan colleagues?", "speaker", "gh_staff_party", 3, 2,
             "shares 'vegan' (also in Priya's sign-up numbers)"),
    Question("How is Helen getting everyone home late at night?", "speaker_paraphrase", "gh_staff_party", 4, 2,
             "no 'coaches', 'return', 'transport'"),
    Question("raffle prizes spa treatments", "topic", "gh_staff_party", 5, 0,
             "'raffle' and 'spa' also in Priya's message of the sitting before"),
    Question("Combien Helen a-t-elle prévu pour la fête du personnel ?", "speaker_other_language",
             "gh_staff_party", 0, 2, "fr question, en dialogue: the overall budget"),
    # ------------------------------------------------------------------ gh_spa_refurb
    Question("What did Rachel decide on the flooring when the slate was delayed?", "speaker", "gh_spa_refurb",
             4, 3, "shares 'slate' (also said by Marcus)"),
    Question("What was wrong with the drain according to Marcus?", "speaker", "gh_spa_refurb", 1, 0,
             "shares 'drain', which Rachel and Marcus say in several sittings"),
    Question("Where will Sanjay send visitors while the works are on?", "speaker_paraphrase", "gh_spa_refurb",
             2, 1, "no 'hammam', 'steam', 'weekend packages'"),
    Question("noise complaints first floor", "topic", "gh_spa_refurb", 3, 0,
             "'floor' recurs (drainage floor, changing room floor)"),
    Question("¿Qué ofreció Sanjay a los huéspedes que se quejaron del ruido?", "speaker_other_language",
             "gh_spa_refurb", 3, 3, "es question, en dialogue: Sanjay proposes, Rachel then decides"),
    # ------------------------------------------------------------------ gh_espresso_lease
    Question("What did Lydia decide about the invoice for the technician visits?", "speaker",
             "gh_espresso_lease", 3, 4, "shares 'invoice' (also asked about by Owen)"),
    Question("What did Owen hear unofficially about the valve?", "speaker", "gh_espresso_lease", 2, 2,
             "shares 'valve' (Lydia repeats it in the next message)"),
    Question("When did the repairer eventually arrive, according to Owen?", "speaker_paraphrase",
             "gh_espresso_lease", 0, 2, "no 'technician', 'turned up', 'logged'"),
    Question("What money did Lydia win back for the period the bar was out of action?", "speaker_paraphrase",
             "gh_espresso_lease", 4, 4, "no 'credit', 'lease', 'downtime', 'negotiated'"),
    Question("backup machine from their depot", "topic", "gh_espresso_lease", 1, 4,
             "'backup machine' also said by Owen twice"),
    # ------------------------------------------------------------------ gh_fr_mariage
    Question("Qu'a dit Julien sur le champagne apporté pour le mariage ?", "speaker", "gh_fr_mariage", 2, 3,
             "shares 'mariage' (Camille says it often); 'champagne' is only in the messages around it"),
    Question("Qu'a décidé Nadia pour les familles qui veulent des lits supplémentaires ?", "speaker",
             "gh_fr_mariage", 3, 2, "shares 'familles' (also said by Camille)"),
    Question("Qu'est-ce que Camille a finalement retenu à la place de la pyrotechnie ?", "speaker_paraphrase",
             "gh_fr_mariage", 4, 5, "no 'feu d'artifice', 'fontaines', 'guirlandes'"),
    Question("combien coûte le menu enfant", "topic", "gh_fr_mariage", 3, 4,
             "'enfants' (plural) is in Julien's messages, 'menu' in his first one"),
    Question("How many rooms could Nadia guarantee for the wedding guests?", "speaker_other_language",
             "gh_fr_mariage", 0, 5, "en question, fr dialogue"),
    # ------------------------------------------------------------------ gh_de_empfangsleitung
    Question("Wer bekommt laut Lukas die Stelle, und zu welchem Gehalt?", "speaker", "gh_de_empfangsleitung",
             3, 4, "shares 'Stelle' (also in Katrin's job posting)"),
    Question("Was hat Katrin über die Nachtschicht-Frage der Bewerberin gesagt?", "speaker",
             "gh_de_empfangsleitung", 2, 2, "shares 'Nachtschicht' (also said by Jana)"),
    Question("Was hat Jana an der Arbeitsweise des zweiten Bewerbers beim Ansturm kritisiert?",
             "speaker_paraphrase", "gh_de_empfangsleitung", 3, 0, "no 'Probetag', 'Gruppe', 'Kessler'"),
    Question("Zulage für die Stellvertreterin", "topic", "gh_de_empfangsleitung", 4, 2,
             "Katrin's message two turns later also has 'Zulage'"),
    Question("Qu'a conseillé Jana pour les mots de passe de la nouvelle responsable ?", "speaker_other_language",
             "gh_de_empfangsleitung", 5, 3, "fr question, de dialogue"),
    # ------------------------------------------------------------------ gh_es_proveedor_pescado
    Question("¿Con quién decidió Marta seguir y qué pidió sobre el precio?", "speaker",
             "gh_es_proveedor_pescado", 3, 2, "shares 'precio' (also said by Lucía and Andrés)"),
    Question("¿Por qué le parecía bien a Andrés pagar más al proveedor caro?", "speaker_paraphrase",
             "gh_es_proveedor_pescado", 2, 3, "no 'tiraba', 'merluza', 'cuenta'"),
    Question("¿Qué hará Lucía con la reclamación económica del antiguo distribuidor?", "speaker_paraphrase",
             "gh_es_proveedor_pescado", 4, 2, "no 'reclama', 'factura', 'pagar', 'Arrieta'"),
    Question("pedido del domingo llegó tarde al brunch", "topic", "gh_es_proveedor_pescado", 3, 0,
             "'domingo' and 'brunch' also in the second sitting"),
    Question("How warm was the fish when it arrived, according to Andrés?", "speaker_other_language",
             "gh_es_proveedor_pescado", 0, 2, "en question, es dialogue"),
    # ------------------------------------------------------------------ acme_notification_backlog
    Question("What threshold did Tom want on the alert?", "speaker", "acme_notification_backlog", 1, 3,
             "shares 'alert' (Kenji and Tom say it in several sittings)"),
    Question("What parameters did Jess choose for the backoff?", "speaker", "acme_notification_backlog", 1, 0,
             "shares 'backoff', said by all three"),
    Question("What did Kenji want his team to be told when things break?", "speaker_paraphrase",
             "acme_notification_backlog", 1, 4, "no 'support', 'Slack', 'heads-up', 'alert'"),
    Question("service credit enterprise tenants", "topic", "acme_notification_backlog", 2, 0,
             "'credit' also in Tom's SLA answers, 'enterprise tenants' in Kenji's first message"),
    Question("Welche Schritte hat Tom in der Betriebsanleitung zum Abbau des Rückstaus festgehalten?",
             "speaker_other_language", "acme_notification_backlog", 4, 0, "de question, en dialogue"),
    # ------------------------------------------------------------------ acme_platform_hire
    Question("What did Marcus think of Beth's interview?", "speaker", "acme_platform_hire", 3, 2,
             "shares 'Beth' (a candidate named by Priya and Hannah)"),
    Question("How much did Priya want to offer the candidate?", "speaker", "acme_platform_hire", 4, 2,
             "shares 'offer' (also in Hannah's messages)"),
    Question("What interview format did Marcus propose instead of coding puzzles?", "speaker_paraphrase",
             "acme_platform_hire", 0, 5, "no 'pairing', 'sandbox', 'leetcode'"),
    Question("config map readiness probe", "topic", "acme_platform_hire", 1, 1,
             "Marcus's debrief of Olumide also mentions the probe and the config map"),
    Question("time to hire retro", "topic", "acme_platform_hire", 6, 2),
    # ------------------------------------------------------------------ acme_ci_actions
    Question("What was Nadia's plan for retiring Jenkins?", "speaker", "acme_ci_actions", 4, 4,
             "shares 'Jenkins', which everybody says"),
    Question("What did Lena suggest to stay under the spending limit?", "speaker_paraphrase", "acme_ci_actions",
             3, 2, "no 'matrix', 'nightly', 'pull requests', 'cap'"),
    Question("What did Ben want done with the credentials that are still needed?", "speaker_paraphrase",
             "acme_ci_actions", 2, 6, "no 'rotate', 'nineteen', 'secrets'"),
    Question("macOS runner iOS build", "topic", "acme_ci_actions", 4, 0,
             "Nadia's answer right after has 'macOS', 'build' and 'iOS' too"),
    Question("¿Qué dijo Lena sobre las pruebas inestables de la base de datos?", "speaker_other_language",
             "acme_ci_actions", 2, 0, "es question, en dialogue"),
    # ------------------------------------------------------------------ acme_fr_salon
    Question("Combien de chaussettes Camille a-t-elle commandées ?", "speaker", "acme_fr_salon", 2, 3,
             "shares 'chaussettes' (Hugo says it twice); Camille orders 800 for next year later on"),
    Question("Où Hugo veut-il recevoir les prospects sur le stand ?", "speaker", "acme_fr_salon", 0, 4,
             "shares 'prospects' (also said by Camille)"),
    Question("Qu'a proposé Élodie pour raccourcir la démo ?", "speaker_paraphrase", "acme_fr_salon", 1, 2,
             "no 'boucle', 'deux minutes', 'continu'"),
    Question("ligne filaire wifi du salon", "topic", "acme_fr_salon", 1, 3, "'salon' is in many messages"),
    Question("How many qualified leads did Hugo bring back from the trade show?", "speaker_other_language",
             "acme_fr_salon", 5, 0, "en question, fr dialogue"),
    # ------------------------------------------------------------------ acme_de_k8s_upgrade
    Question("Wie sieht der Rollback-Plan von Lukas aus?", "speaker", "acme_de_k8s_upgrade", 3, 3,
             "shares 'Rollback' (Sabine asked for it first)"),
    Question("Warum wollte Emre einen Wartungstermin verlegen?", "speaker_paraphrase", "acme_de_k8s_upgrade",
             3, 1, "no 'Dienstag', 'Abrechnungsjobs', 'schieben'"),
    Question("Rate-Limiting nach Client-IP kaputt", "topic", "acme_de_k8s_upgrade", 2, 1,
             "Lukas's fix two turns later also has 'Client'"),
    Question("Grace Period 120 Sekunden", "topic", "acme_de_k8s_upgrade", 4, 3,
             "Emre's wiki page in the last sitting also has 'Grace Period'"),
    Question("How often does Sabine want version bumps from now on?", "speaker_other_language",
             "acme_de_k8s_upgrade", 5, 3, "en question, de dialogue"),
    # ------------------------------------------------------------------ acme_es_app_proveedor
    Question("¿Qué dijo Marta sobre el anexo y quién paga el arreglo?", "speaker", "acme_es_app_proveedor",
             3, 4, "shares 'anexo' (Diego cites it right after)"),
    Question("¿Qué hizo Sergio con el cobro de Nubaria por un trabajo aún sin aprobar?", "speaker_paraphrase",
             "acme_es_app_proveedor", 2, 5, "no 'factura', 'retenida', 'aceptación'"),
    Question("penalización por semana de retraso", "topic", "acme_es_app_proveedor", 0, 2,
             "Sergio computes the penalty, with 'penalización' and 'retraso', four sittings later"),
    Question("notificaciones push Android 14", "topic", "acme_es_app_proveedor", 2, 0,
             "'Android' and 'notificaciones' recur in the next messages"),
    Question("What did Diego ask for before agreeing to the new schedule?", "speaker_other_language",
             "acme_es_app_proveedor", 1, 4, "en question, es dialogue"),
)


if __name__ == "__main__":
    import re

    KINDS = ("speaker", "speaker_paraphrase", "topic", "speaker_other_language")
    SPEAKER_KINDS = ("speaker", "speaker_paraphrase", "speaker_other_language")
    LANGUAGES = ("en", "fr", "de", "es")
    # Function words of en/fr/de/es, question words and verbs of saying; elided fragments (l', qu', 's) too.
    STOPWORDS = frozenset("""
        a an the of to in on at for from by with without about and or but not no so as if than then there
        what which who whom whose when where why how much many according while
        do does did done is are was were be been being has have had will would can could should
        i me my we us our you your he him his she her they them their it its this that these those
        say says said tell told mention mentioned
        s t d ll re ve m
        le la les l un une des de du d et ou à au aux en dans sur pour par avec sans que qu qui quoi
        quel quelle quels quelles est ont été ce c ces se s il elle ils elles on je j tu nous vous
        leur leurs son sa ses ne n pas y dit combien où comment pourquoi quand
        der die das den dem des ein eine einen einem einer und oder zu zum zur im am an auf mit von vom
        für über bei beim nach aus ohne was wer wen wem wie wann wo warum welche welcher welches welchen
        hat haben hatte ist sind war wurde er sie es ich wir ihr sein seine ihre sich nicht laut wegen
        gesagt sagte
        el los las lo unos unas del al y o con sin por para sobre qué quién quiénes cuál cuándo dónde
        cómo cuánto cuántos es son fue ha han le les su sus dijo dice según me nos te mi tu si
    """.split())

    def tokens(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    def count(items) -> dict:
        out: dict = {}
        for item in items:
            out[item] = out.get(item, 0) + 1
        return out

    problems: list[str] = []
    by_key: dict[str, Dialogue] = {}
    messages = 0
    for d in DIALOGUES:
        if d.key in by_key:
            problems.append(f"{d.key}: duplicate dialogue key")
        by_key[d.key] = d
        if not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", d.key):
            problems.append(f"{d.key}: key is not snake_case")
        if d.workspace not in ("grand-hotel", "acme"):
            problems.append(f"{d.key}: workspace {d.workspace}")
        if d.language not in LANGUAGES:
            problems.append(f"{d.key}: language {d.language}")
        if not d.title.strip():
            problems.append(f"{d.key}: no title")
        people = {p.key: p for p in d.people}
        if not 2 <= len(d.people) <= 3 or len(people) != len(d.people):
            problems.append(f"{d.key}: needs 2-3 people with unique keys")
        firsts = [p.display_name.split()[0].lower() for p in d.people]
        if len(set(firsts)) != len(firsts):
            problems.append(f"{d.key}: two people share a first name")
        if not 4 <= len(d.sittings) <= 7:
            problems.append(f"{d.key}: {len(d.sittings)} sittings")
        days = [s.days_ago for s in d.sittings]
        if any(a <= b for a, b in zip(days, days[1:])) or days[-1] < 0:
            problems.append(f"{d.key}: days_ago {days} not strictly decreasing and >= 0")
        if days[0] - days[-1] < 21:
            problems.append(f"{d.key}: sittings span only {days[0] - days[-1]} days")
        spoken = set()
        for i, s in enumerate(d.sittings):
            messages += len(s.turns)
            if not 5 <= len(s.turns) <= 10:
                problems.append(f"{d.key}[{i}]: {len(s.turns)} turns")
            if len({who for who, _ in s.turns}) < 2:
                problems.append(f"{d.key}[{i}]: only one person speaks")
            for j, (who, body) in enumerate(s.turns):
                spoken.add(who)
                person = people.get(who)
                if person is None:
                    problems.append(f"{d.key}[{i}][{j}]: unknown speaker {who}")
                    continue
                own = set(tokens(person.display_name))
                if own & set(tokens(body)):
                    problems.append(f"{d.key}[{i}][{j}]: {who} says their own name")
                sentences = len(re.findall(r"(?<!\d)[.!?](?=\s|$)", body.strip()))
                if not body.strip() or sentences > 3 or len(body) > 320:
                    problems.append(f"{d.key}[{i}][{j}]: body of {sentences} sentences / {len(body)} chars")
        if spoken != set(people):
            problems.append(f"{d.key}: people who never speak: {sorted(set(people) - spoken)}")
    if not 300 <= messages <= 450:
        problems.append(f"{messages} messages in all, expected 300-450")
    if count(d.language for d in DIALOGUES) != {"en": 6, "fr": 2, "de": 2, "es": 2}:
        problems.append(f"dialogues by language: {count(d.language for d in DIALOGUES)}")
    if count(d.workspace for d in DIALOGUES) != {"grand-hotel": 6, "acme": 6}:
        problems.append(f"dialogues by workspace: {count(d.workspace for d in DIALOGUES)}")

    def said_by_others(d: Dialogue, word: str, speaker: str) -> bool:
        return any(word in tokens(body) for s in d.sittings for who, body in s.turns if who != speaker)

    question_languages = []
    seen_texts = set()
    for q in QUESTIONS:
        label = f"{q.text!r} ({q.kind})"
        if q.text in seen_texts:
            problems.append(f"{label}: duplicate question")
        seen_texts.add(q.text)
        if q.kind not in KINDS:
            problems.append(f"{label}: unknown kind")
        d = by_key.get(q.dialogue)
        if d is None:
            problems.append(f"{label}: unknown dialogue {q.dialogue}")
            continue
        if not (0 <= q.sitting < len(d.sittings) and 0 <= q.turn < len(d.sittings[q.sitting].turns)):
            problems.append(f"{label}: no turn [{q.sitting}][{q.turn}] in {d.key}")
            continue
        who, body = d.sittings[q.sitting].turns[q.turn]
        person = next((p for p in d.people if p.key == who), None)
        if person is None:
            continue
        q_lang = d.language
        if q.kind == "speaker_other_language":
            q_lang = q.note.split(" ", 1)[0]
            if not q.note.startswith(f"{q_lang} question") or q_lang not in LANGUAGES or q_lang == d.language:
                problems.append(f"{label}: note must start with '<lang> question', lang other than {d.language}")
        question_languages.append(q_lang)
        q_tokens = tokens(q.text)
        name_tokens = set(tokens(person.display_name))
        body_tokens = set(tokens(body))
        if q.kind in SPEAKER_KINDS:
            first = person.display_name.split()[0].lower()
            if first not in q_tokens and person.display_name.lower() not in q.text.lower():
                problems.append(f"{label}: does not name the speaker {person.display_name}")
            if first in body_tokens:
                problems.append(f"{label}: target body contains the speaker's first name")
            shared = sorted((set(q_tokens) & body_tokens) - STOPWORDS - name_tokens)
            if q.kind == "speaker_paraphrase" and shared:
                problems.append(f"{label}: shares {shared} with the target")
            if q.kind in ("speaker", "speaker_other_language") and len(shared) > 1:
                problems.append(f"{label}: shares {shared} with the target (at most one)")
            if q.kind == "speaker" and len(shared) == 1 and not said_by_others(d, shared[0], who):
                problems.append(f"{label}: shared word {shared[0]!r} is not said by anyone else in {d.key}")
        else:  # topic
            words = set(q_tokens) - STOPWORDS
            if not 2 <= len(words) <= 5:
                problems.append(f"{label}: {len(words)} content words, expected 2-5")
            hits = len(words & body_tokens)
            if hits < 2:
                problems.append(f"{label}: only {hits} content words in the target")
            for i, s in enumerate(d.sittings):
                for j, (_, other) in enumerate(s.turns):
                    if (i, j) != (q.sitting, q.turn) and len(words & set(tokens(other))) >= hits:
                        problems.append(f"{label}: turn [{i}][{j}] matches as many words as the target")
            named = [p.display_name for p in d.people if set(tokens(p.display_name)) & set(q_tokens)]
            if named:
                problems.append(f"{label}: a topic question names {named}")
    per_dialogue = count(q.dialogue for q in QUESTIONS)
    for d in DIALOGUES:
        targets = {q.sitting for q in QUESTIONS if q.dialogue == d.key}
        if per_dialogue.get(d.key, 0) < 4:
            problems.append(f"{d.key}: only {per_dialogue.get(d.key, 0)} questions")
        if len(targets) < 3:
            problems.append(f"{d.key}: targets in only {len(targets)} sittings")
    if len(QUESTIONS) != 60:
        problems.append(f"{len(QUESTIONS)} questions, expected 60")
    if problems:
        raise SystemExit("eval_dialogues problems:\n  " + "\n  ".join(problems))

    sittings = sum(len(d.sittings) for d in DIALOGUES)
    print(f"{len(DIALOGUES)} dialogues, {sittings} sittings, {messages} messages, {len(QUESTIONS)} questions: OK")
    print("dialogues by language:", count(d.language for d in DIALOGUES))
    print("dialogues by workspace:", count(d.workspace for d in DIALOGUES))
    print("messages by language:", count(d.language for d in DIALOGUES for s in d.sittings for _ in s.turns))
    print("questions by kind:", count(q.kind for q in QUESTIONS))
    print("questions by language:", count(question_languages))
    print("questions by workspace:", count(by_key[q.dialogue].workspace for q in QUESTIONS))
    print("questions by dialogue language:", count(by_key[q.dialogue].language for q in QUESTIONS))
    position = count("first" if q.sitting == 0 else "last" if q.sitting == len(by_key[q.dialogue].sittings) - 1
                     else "middle" for q in QUESTIONS)
    print("target sittings:", position)
