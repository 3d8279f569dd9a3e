"""The nine target subreddits of the paper's Reddit data set (Table 2), in event order.

A user's event j is their first submission to ``SUBREDDITS[j]`` after their 20th comment.
Subreddit names in the dumps are matched case-insensitively (``cohort.TARGETS``).

    >>> len(SUBREDDITS), SUBREDDITS[0]
    (9, 'ADHD')
"""

from __future__ import annotations

SUBREDDITS = ["ADHD", "Anxiety", "books", "depression", "Fitness", "LifeProTips", "mentalhealth",
              "SuicideWatch", "worldnews"]
