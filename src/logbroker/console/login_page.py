"""The console's login form, rendered on the server (no script: it works
under the pages' Content-Security-Policy and without JavaScript).

``render(message)`` is the whole HTML page; ``message`` (a failure, shown
above the form) is escaped. The form posts ``user`` and ``password`` to
``/login`` (login.py); the password is never put back into the page.
"""

from __future__ import annotations

import html

from ..protocol.auth_messages import MAX_USER_CHARS
from .sessions import IDLE_S, MAX_AGE_S

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>logbroker console: log in</title>
<link rel="stylesheet" href="/static/console.css">
</head>
<body>
<header>
  <span class="brand">logbroker</span>
  <span class="readonly" title="This console has no route that changes anything">read-only</span>
</header>
<main>
<form class="login" id="login" method="post" action="/login">
  <h1>Log in</h1>
  {notice}
  <label>user <input name="user" id="user" autocomplete="username" required autofocus
    maxlength="{max_user}"></label>
  <label>password <input type="password" name="password" id="password"
    autocomplete="current-password" required maxlength="1024"></label>
  <button type="submit" id="submit">Log in</button>
  <p class="muted">A user of this broker (<code>logbroker users add</code>). A session ends
  after {idle} minutes unused, {max_age} hours at most, or at logout.</p>
</form>
</main>
</body>
</html>
"""


def render(message: "str | None" = None) -> str:
    notice = "" if not message else f'<p class="error" id="error">{html.escape(message)}</p>'
    return PAGE.format(notice=notice, max_user=MAX_USER_CHARS, idle=IDLE_S // 60,
                       max_age=MAX_AGE_S // 3600)
