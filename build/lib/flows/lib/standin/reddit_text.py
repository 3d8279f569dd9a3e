"""Words for the Reddit stand-in: per-topic phrases, so that a user's interests show in the text.

One topic per target subreddit (same order as ``flows.lib.reddit.subreddits.SUBREDDITS``) plus general chatter. A comment
is two or three phrases; a topical comment draws them from one topic. Some phrases carry
multi-byte UTF-8 (accents, CJK, emoji) so readers are exercised on it.
"""

from __future__ import annotations

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
