"""Words for the Reddit stand-in: per-topic phrases, so that a user's interests show in the text.

One topic per target subreddit (same order as ``flows.lib.reddit.subreddits.SUBREDDITS``) plus general chatter. A
comment
is two or three phrases; a topical comment draws them from one topic. Some phrases carry
multi-byte UTF-8 (accents, CJK, emoji) so readers are exercised on it.
"""

from __future__ import annotations

import numpy as np

TOPIC_PHRASES: list[list[str]] = [
    [  # ADHD
        "I keep losing focus halfway through every task", "my stimulant meds finally kicked in today",
        "procrastination is eating my whole week", "I forgot the appointment again, third time",
        "hyperfocus on a side project until 4am", "my psychiatrist adjusted the dose",
        "can't sit through a meeting without fidgeting", "executive function is a myth for me",
        "timers and sticky notes everywhere in my room", "got diagnosed as an adult last year",
    ],
    [  # Anxiety
        "my heart races before every phone call", "panic attack on the train this morning",
        "I overthink every message I send", "breathing exercises help a little",
        "social situations leave me exhausted", "can't stop worrying about the worst case",
        "my chest feels tight all the time", "therapist suggested exposure practice",
        "nervous about the interview tomorrow", "constant dread for no reason",
    ],
    [  # books
        "just finished a great fantasy novel", "the sequel was better than the first book",
        "reading Dostoevsky for the first time", "my library hold finally came in",
        "this author's prose is beautiful", "book club picked a mystery this month",
        "I read about fifty books a year", "paperbacks over e-readers any day",
        "re-reading Tolkien every winter", "a translated novel from Japan, 村上春樹 style",
    ],
    [  # depression
        "I can't get out of bed most days", "nothing feels enjoyable anymore",
        "sleeping fourteen hours and still tired", "feel empty and numb lately",
        "started antidepressants two weeks ago", "I cancel plans because I have no energy",
        "hard to see the point of anything", "my motivation is completely gone",
        "crying for no reason again", "the winter months are the worst for my mood",
    ],
    [  # Fitness
        "hit a new deadlift PR today", "progressive overload is the key",
        "meal prep and protein every day", "doing a push pull legs split",
        "ran my first 10k this weekend", "my squat form needs work",
        "cutting for summer, down five pounds", "gym at 6am before work",
        "bench press plateau for weeks", "rest days matter as much as training 💪",
    ],
    [  # LifeProTips
        "pro tip: keep a spare charger in your bag", "always read the fine print on contracts",
        "freeze bread so it never goes stale", "set up automatic savings on payday",
        "use a password manager for everything", "take photos of your rental before moving in",
        "negotiate your salary every time", "call customer service and ask for retention",
        "label your cables with tape", "write down serial numbers of your electronics",
    ],
    [  # mentalhealth
        "therapy has been helping me slowly", "talking about mental health at work is hard",
        "self care is more than bubble baths", "finding a good counselor took months",
        "journaling every night helps me process", "burnout hit me hard this year",
        "support groups made me feel less alone", "mental health days should be normal",
        "my wellbeing improved after quitting social media", "medication and therapy together",
    ],
    [  # SuicideWatch
        "I feel like a burden to everyone", "nobody would notice if I was gone",
        "I don't know how much longer I can do this", "everything feels hopeless tonight",
        "I wrote a letter I never sent", "I just want the pain to stop",
        "reaching out because I have nobody else", "the crisis line talked me down last night",
        "I keep thinking about ending it", "tired of pretending I'm fine",
    ],
    [  # worldnews
        "the election results surprised everyone", "sanctions were announced this morning",
        "the summit ended without an agreement", "protests spread to the capital",
        "the central bank raised interest rates", "a ceasefire was declared overnight",
        "trade talks resumed after months", "the parliament voted on the new law",
        "refugees crossing the border increased", "the prime minister resigned today — big news",
    ],
]

GENERAL_PHRASES = [
    "lol that's hilarious", "this is the best thing I've seen today", "I agree with you completely",
    "source? I'd like to read more", "came here to say this", "same thing happened to me",
    "the game last night was incredible", "my cat does the exact same thing", "thanks for sharing",
    "this thread is gold", "I don't think that's how it works", "upvoted for visibility",
    "what a time to be alive", "can confirm, used to work there", "café au lait is underrated",
    "that's a really good point", "I had no idea, TIL", "happy cake day!", "this aged well",
    "we need more posts like this", "edit: typo", "that escalated quickly",
]

GENERAL_SUBREDDITS = ["AskReddit", "pics", "funny", "gaming", "todayilearned", "movies", "aww", "news",
                      "videos", "science", "Music", "television", "sports", "technology"]
TOPIC_SUBREDDITS = [
    ["ADHD", "adhdwomen", "productivity"], ["Anxiety", "socialanxiety", "HealthAnxiety"],
    ["books", "Fantasy", "suggestmeabook"], ["depression", "lonely", "depression_help"],
    ["Fitness", "bodyweightfitness", "running"], ["LifeProTips", "lifehacks", "personalfinance"],
    ["mentalhealth", "selfimprovement", "therapy"], ["SuicideWatch", "offmychest", "depression"],
    ["worldnews", "politics", "europe"],
]

ADJECTIVES = ["quiet", "brave", "lazy", "happy", "cosmic", "rusty", "silver", "wandering", "sleepy", "grumpy",
              "lucky", "clever", "purple", "frozen", "mighty", "gentle", "wild", "tiny", "ancient", "salty"]
NOUNS = ["otter", "falcon", "pancake", "wizard", "tiger", "cactus", "penguin", "panda", "rocket", "badger",
         "turtle", "dragon", "muffin", "koala", "walrus", "phoenix", "llama", "noodle", "comet", "beaver"]


# --- realistic comment text ("--text realistic") -------------------------------------------------
# Real comments are mostly unique and their length has a long right tail: in the 2017 dumps the
# median body is about 100 characters, the mean about 200, one in a hundred is over ~1,500 and
# Reddit caps a body at 10,000. A log-normal length (median 100, sigma 1.1: mean 183, p99 1,290)
# filled with Zipf-distributed words gives that shape and almost no repeats, except the short
# stock replies real threads are full of ("lol", "This.", "Thanks!").

TEXT_STYLES = ("phrases", "realistic")
MEDIAN_CHARS, SIGMA_LOG_CHARS, MAX_CHARS = 100.0, 1.1, 10_000

COMMON_WORDS = """
the be to of and a in that have I it for not on with he as you do at this but his by from they we
say her she or an will my one all would there their what so up out if about who get which go me
when make can like time no just him know take people into year your good some could them see other
than then now look only come its over think also back after use two how our work first well way
even new want because any these give day most us is was are been has had were said did getting
really pretty actually probably literally honestly basically though anyway maybe still always
never again already almost enough quite rather something nothing everything anything someone
everyone thing things stuff point reason problem question answer idea issue example part place
case week month today yesterday tomorrow morning night hour minute life world game post comment
thread sub reddit karma upvote downvote edit source link video picture article news story friend
family guy girl man woman kid dog cat car house job school class money phone computer internet
right wrong true false sure yes yeah nope lol lmao wow damn hell okay ok exactly agree disagree
love hate feel seem try tried trying need needed keep kept let put find found tell told ask asked
show help start stop play run read write watch buy pay call move live believe hold bring happen
better best worse worst bad great little big long old young high low small large different same
real whole free full hard easy sorry thanks please maybe probably definitely absolutely certainly
""".split()

SHORT_REPLIES = ["lol", "This.", "Thanks!", "Same.", "Yes.", "No.", "Source?", "Nice.", "Agreed.",
                 "Exactly.", "lmao", "Wow.", "Same here", "Thank you!", "I know, right?", "Ha!",
                 "Came here to say this", "This is the way", "Underrated comment", "😂", "[deleted]"]
_ENDINGS = np.array([".", ".", ".", ".", "?", "!", "...", " :)"])


def _zipf_weights(n: int, s: float = 0.9) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


def _sentence_pieces(words: list[str], lengths: np.ndarray, endings: np.ndarray) -> list[str]:
    out, at = [], 0
    for k, n in enumerate(lengths.tolist()):
        chunk = words[at:at + n]
        at += n
        if not chunk:
            break
        chunk[0] = chunk[0][:1].upper() + chunk[0][1:]
        out.append(" ".join(chunk) + endings[k])
    return out


def realistic_texts(topic: np.ndarray, rng: np.random.Generator) -> list[str]:
    """One comment body per entry of ``topic`` (a topic index, or -1 for general chatter).

    Lengths are log-normal (median ``MEDIAN_CHARS``, sigma ``SIGMA_LOG_CHARS``, capped at
    ``MAX_CHARS``); the body is sentences of Zipf-distributed common words. A topical comment
    carries phrases of its topic, about one per 150 characters and at least one, so the
    user's interests still show in the embedding; a very short general comment is a stock
    reply. Paragraph breaks, quoted lines (``&gt;``, as the dumps escape them) and links occur
    at rates of a few percent, as in real threads.

    >>> import numpy as np
    >>> texts = realistic_texts(np.array([-1, 0, 3, -1] * 250), np.random.default_rng(0))
    >>> len(texts), len(set(texts)) > 900, bool(150 < np.mean([len(t) for t in texts]) < 260)
    (1000, True, True)
    """
    n = topic.size
    vocab = COMMON_WORDS
    weights = _zipf_weights(len(vocab))
    target = np.minimum(np.exp(np.log(MEDIAN_CHARS) + SIGMA_LOG_CHARS * rng.standard_normal(n)),
                        MAX_CHARS).astype(int)
    n_words = np.maximum(1, target // 5 + 1)
    words = np.asarray(vocab, dtype=object)[rng.choice(len(vocab), int(n_words.sum()), p=weights)].tolist()
    sent_len = rng.integers(4, 19, int(n_words.sum()))  # words per sentence
    endings = _ENDINGS[rng.integers(0, len(_ENDINGS), int(n_words.sum()))]
    extras = rng.random((n, 4))  # stock reply, paragraph break, quote, link
    out, at = [], 0
    for i in range(n):
        k, tp, length = int(n_words[i]), int(topic[i]), int(target[i])
        wds, at = words[at:at + k], at + k
        if tp < 0 and length < 25 and extras[i, 0] < 0.5:
            out.append(SHORT_REPLIES[int(rng.integers(0, len(SHORT_REPLIES)))])
            continue
        sentences = _sentence_pieces(wds, sent_len[at - k:at], endings[at - k:at])
        if tp >= 0:
            phrases = TOPIC_PHRASES[tp]
            for _ in range(max(1, length // 150)):
                p = phrases[int(rng.integers(0, len(phrases)))]
                sentences.insert(int(rng.integers(0, len(sentences) + 1)), p[:1].upper() + p[1:] + ".")
        if extras[i, 2] < 0.04 and len(sentences) > 1:
            sentences[0] = "&gt; " + sentences[0] + "\n\n"
        if extras[i, 3] < 0.03:
            sentences.append(f"https://en.wikipedia.org/wiki/{wds[0].capitalize()}_{int(rng.integers(0, 10**6))}")
        body = ""
        for j, sen in enumerate(sentences):
            sep = "" if j == 0 or body.endswith("\n\n") else ("\n\n" if extras[i, 1] < 0.3 and j % 4 == 0 else " ")
            body += sep + sen
        if tp < 0 and len(body) > length + 20:  # general chatter is cut at its length, at a word boundary
            body = body[:length].rsplit(" ", 1)[0].rstrip(",") + "."
        out.append(body[:MAX_CHARS])
    return out
