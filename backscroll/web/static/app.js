// Backscroll's sessions sidebar. Plain JavaScript, no build, nothing fetched from elsewhere.
//
// Two rules shape this file:
// - Every string from the server reaches the page through textContent or a text node, never
//   through innerHTML: a title or a message body that reads "<script>" is shown, not run.
//   Excerpt highlights are built from the server's [start, end) offsets, not from markup.
// - The sidebar never decides what exists: lists and searches are the server's pages, read with
//   the opaque `next` cursor, and a conversation no page has reached is read on its own before
//   it is called missing (only a 404 from the server says "not found").
"use strict";

(() => {
  const TOKEN_KEY = "backscroll.readerToken";
  const PAGE_SIZE = 25;
  const DEBOUNCE_MS = 250;
  // A search hit names its matched message; the transcript is read page by page until it is found,
  // but not forever: a very long conversation opens at its start instead.
  const MAX_PAGES_TO_FIND_HIT = 20;

  const $ = (id) => document.getElementById(id);
  const ui = {
    signin: $("signin"), signinForm: $("signin-form"), token: $("token"), signinButton: $("signin-button"),
    signinError: $("signin-error"), app: $("app"), q: $("q"), signout: $("signout"), notice: $("notice"),
    scroller: $("scroller"), list: $("list"), listState: $("list-state"), sentinel: $("sentinel"),
    back: $("back"), readerEmpty: $("reader-empty"), conversation: $("conversation"), title: $("conv-title"),
    meta: $("conv-meta"), messages: $("messages"), readerState: $("reader-state"),
  };

  const REASONS = { title: "Title match", content: "Content match", semantic: "Semantic match" };
  const ROLES = { user: "User", assistant: "Assistant", tool: "Tool", system: "System", summary: "Summary" };

  let token = null;

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const isAbort = (e) => e && e.name === "AbortError";

  async function api(path, params, signal) {
    const url = new URL(path, window.location.origin);
    for (const [key, value] of Object.entries(params || {})) {
      if (value !== null && value !== undefined && value !== "") url.searchParams.set(key, String(value));
    }
    let response;
    try {
      response = await fetch(url, {
        headers: { Authorization: `Bearer ${token}`, Accept: "application/json" },
        signal, cache: "no-store", credentials: "omit",
      });
    } catch (e) {
      if (isAbort(e)) throw e;
      throw new ApiError(0, "network", "The server could not be reached.");
    }
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      if (isAbort(e)) throw e;
    }
    if (!response.ok) {
      const error = body && typeof body.error === "object" && body.error ? body.error : {};
      const message = typeof error.message === "string" && error.message
        ? error.message : `The server answered ${response.status}.`;
      throw new ApiError(response.status, String(error.code || `http_${response.status}`), message);
    }
    if (body === null || typeof body !== "object") {
      throw new ApiError(response.status, "bad_response", "The server's answer was not JSON.");
    }
    return body;
  }

  // A 401 after sign-in means the token was revoked or the server forgot it: ask for a new one.
  function endedByAuth(error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut("The server no longer accepts this token. Sign in again.");
      return true;
    }
    return false;
  }

  function text(tag, content, className) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    node.textContent = content;
    return node;
  }

  function timeNode(iso) {
    const node = document.createElement("time");
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return text("span", "");
    node.dateTime = date.toISOString();
    node.title = date.toLocaleString();
    const sameDay = date.toDateString() === new Date().toDateString();
    node.textContent = sameDay
      ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
      : date.toLocaleDateString([], { year: "numeric", month: "short", day: "numeric" });
    return node;
  }

  // The server's highlight offsets count code points (Python string indices); JavaScript strings
  // index UTF-16 units, so an emoji before a match would shift every mark. Slice by code point.
  function markedExcerpt(excerpt, highlights) {
    const fragment = document.createDocumentFragment();
    const chars = Array.from(excerpt);
    const spans = (Array.isArray(highlights) ? highlights : [])
      .filter((s) => Array.isArray(s) && s.length === 2 && Number.isInteger(s[0]) && Number.isInteger(s[1])
        && s[0] >= 0 && s[0] < s[1] && s[1] <= chars.length)
      .sort((a, b) => a[0] - b[0]);
    let pos = 0;
    for (const [start, end] of spans) {
      if (start < pos) continue; // overlapping spans: the first one wins
      if (start > pos) fragment.append(chars.slice(pos, start).join(""));
      fragment.append(text("mark", chars.slice(start, end).join("")));
      pos = end;
    }
    if (pos < chars.length) fragment.append(chars.slice(pos).join(""));
    return fragment;
  }

  function agentLabel(session) {
    const agent = session && typeof session.agent === "object" && session.agent ? session.agent : {};
    return agent.name || agent.slug || "";
  }

  // ---------------------------------------------------------------------------------------------
  // The sidebar: recent conversations, or the server's matches for the query, a page at a time.
  // ---------------------------------------------------------------------------------------------

  let list = null;
  let searchTimer = null;

  function newList(q) {
    // pending: a newer query has been typed and this list only waits to be replaced.
    return { q, next: null, done: false, loading: false, pending: false, error: null, controller: null,
      ids: new Set(), count: 0 };
  }

  function stopList() {
    if (list && list.controller) list.controller.abort();
  }

  function startList(q) {
    stopList();
    list = newList(q);
    ui.list.replaceChildren();
    ui.scroller.scrollTop = 0;
    hideNotice();
    loadMore();
  }

  async function loadMore() {
    const current = list;
    if (!current || current.loading || current.pending || current.done || current.error || token === null) return;
    current.loading = true;
    current.controller = new AbortController();
    renderListState();
    try {
      const body = await api("/v1/agent-sessions",
        { q: current.q, before: current.next, limit: PAGE_SIZE }, current.controller.signal);
      if (current !== list) return;
      if (current.count === 0) showDegradation(body, current.q);
      const sessions = Array.isArray(body.sessions) ? body.sessions : [];
      for (const session of sessions) {
        // A conversation that became active between two pages can show up on both; keep the first.
        if (!session || current.ids.has(session.id)) continue;
        current.ids.add(session.id);
        current.count += 1;
        ui.list.append(listItem(session));
      }
      current.next = typeof body.next === "string" ? body.next : null;
      current.done = current.next === null;
    } catch (e) {
      if (isAbort(e) || current !== list) return;
      if (endedByAuth(e)) return;
      current.error = e;
    } finally {
      if (current === list) {
        current.loading = false;
        current.controller = null;
        renderListState();
        markSelected();
        // A page too short to scroll never moves the sentinel: keep reading while it shows.
        requestAnimationFrame(fillViewport);
      }
    }
  }

  function sentinelVisible() {
    const box = ui.scroller.getBoundingClientRect();
    const mark = ui.sentinel.getBoundingClientRect();
    return box.height > 0 && mark.top <= box.bottom + 300;
  }

  function fillViewport() {
    if (list && !list.done && !list.loading && !list.error && sentinelVisible()) loadMore();
  }

  function renderListState() {
    const state = ui.listState;
    state.replaceChildren();
    let kind = "more";
    if (list.loading || list.pending) {
      kind = "loading";
      state.append(text("span", list.q ? "Searching…" : "Loading conversations…", "spinner"));
    } else if (list.error) {
      kind = "error";
      state.append(text("span", `${list.q ? "Search failed" : "Could not load conversations"}: ${list.error.message}`,
        "error"));
      // A search's cursor cannot continue once its mode changed (semantic search went away between
      // pages): the only way on is the first page again. Anything else retries the same page.
      const restart = list.error.code === "cursor_mode_changed";
      const retry = text("button", restart ? "Search again" : "Retry", "quiet");
      retry.type = "button";
      retry.addEventListener("click", () => {
        if (restart) {
          startList(list.q);
        } else {
          list.error = null;
          loadMore();
        }
      });
      state.append(" ", retry);
    } else if (list.done && list.count === 0) {
      kind = "empty";
      if (list.q) {
        state.append(text("span", `Nothing you can see matches “${list.q}”.`),
          text("span", "Try another word from the conversation, a phrase in quotes, or fewer words.", "hint"));
      } else {
        state.append(text("span", "No conversations yet."),
          text("span", "Conversations with your agents will show here as they happen.", "hint"));
      }
    } else if (list.done) {
      kind = "end";
      state.append(text("span", list.q ? "No more matches." : "No more conversations.", "hint"));
    }
    state.dataset.state = kind;
    state.dataset.query = list.q || ""; // which question this state answers (tests wait on it)
    ui.scroller.setAttribute("aria-busy", String(list.loading));
  }

  function hideNotice() {
    ui.notice.hidden = true;
    ui.notice.textContent = "";
    delete ui.notice.dataset.kind;
  }

  // A search whose semantic half could not run still answers with word matches; say so, without
  // alarm, and say nothing when semantic search is simply not configured (mode "lexical").
  function showDegradation(body, q) {
    hideNotice();
    if (!q) return;
    const degradation = body.degradation && typeof body.degradation === "object" ? body.degradation : null;
    if (body.mode !== "degraded" && !degradation) return;
    const category = degradation && typeof degradation.category === "string" ? degradation.category : "unavailable";
    let message;
    if (category === "backfilling") {
      const coverage = Number(degradation.coverage);
      const share = Number.isFinite(coverage) ? ` (${Math.floor(coverage * 100)}% indexed so far)` : "";
      message = `Search by meaning is still catching up${share}: the rest is found by its words only.`;
    } else {
      const why = { timeout: "it took too long", unavailable: "its server does not answer",
        rejected: "its server refused the request", not_registered: "no model is set up yet" }[category];
      message = `Search by meaning is unavailable${why ? ` (${why})` : ` (${category})`}: `
        + "these results match your words only.";
    }
    ui.notice.textContent = message;
    ui.notice.dataset.kind = "degraded";
    ui.notice.hidden = false;
  }

  function listItem(session) {
    const li = document.createElement("li");
    li.className = "item";
    li.dataset.id = String(session.id);
    const link = document.createElement("a");
    link.className = "item-link";
    link.href = `/c/${encodeURIComponent(String(session.id))}`;
    const title = session.title ? text("span", session.title, "item-title")
      : text("span", "Untitled conversation", "item-title untitled");
    const meta = document.createElement("span");
    meta.className = "item-meta";
    const parts = [agentLabel(session), session.connector].filter((p) => typeof p === "string" && p);
    meta.append(parts.join(" · "), parts.length ? " · " : "", timeNode(session.last_active_at));
    link.append(title, meta);
    const match = session.match && typeof session.match === "object" ? session.match : null;
    if (match) {
      const reasons = document.createElement("span");
      reasons.className = "reasons";
      for (const kind of Array.isArray(match.on) ? match.on : []) {
        const reason = text("span", REASONS[kind] || `${String(kind)} match`, "reason");
        reason.dataset.kind = String(kind);
        reasons.append(reason);
      }
      link.append(reasons);
      if (typeof match.excerpt === "string" && match.excerpt) {
        const excerpt = document.createElement("span");
        excerpt.className = "excerpt";
        excerpt.append(markedExcerpt(match.excerpt, match.highlights));
        link.append(excerpt);
      }
    }
    link.addEventListener("click", (event) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      event.preventDefault();
      const messageId = match && Number.isInteger(match.message_id) ? match.message_id : null;
      navigate(session.id, messageId, session);
    });
    li.append(link);
    return li;
  }

  function markSelected() {
    for (const li of ui.list.children) {
      const selected = reader.id !== null && li.dataset.id === String(reader.id);
      li.classList.toggle("selected", selected);
      if (selected) li.firstChild.setAttribute("aria-current", "true");
      else li.firstChild.removeAttribute("aria-current");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The transcript of one conversation.
  // ---------------------------------------------------------------------------------------------

  const reader = { id: null, controller: null, next: null, messageId: null };

  function parseLocation() {
    const path = window.location.pathname;
    if (path === "/" || path === "") return { kind: "home" };
    const found = /^\/c\/([^/]*)\/?$/.exec(path);
    if (!found) return { kind: "home" };
    const raw = decodeURIComponent(found[1]);
    if (!/^[1-9][0-9]{0,18}$/.test(raw)) return { kind: "bad", raw };
    const hash = /^#m([1-9][0-9]{0,18})$/.exec(window.location.hash);
    return { kind: "conversation", id: Number(raw), messageId: hash ? Number(hash[1]) : null };
  }

  function route() {
    const where = parseLocation();
    if (where.kind === "conversation") openConversation(where.id, where.messageId, null);
    else if (where.kind === "bad") showReaderProblem("bad", `“${where.raw}” is not a conversation link.`);
    else closeConversation();
  }

  function navigate(id, messageId, session) {
    const url = `/c/${id}${messageId ? `#m${messageId}` : ""}`;
    if (window.location.pathname + window.location.hash !== url) window.history.pushState(null, "", url);
    openConversation(id, messageId, session);
  }

  function resetReader() {
    if (reader.controller) reader.controller.abort();
    reader.controller = new AbortController();
    reader.next = null;
    ui.messages.replaceChildren();
    ui.readerState.replaceChildren();
    ui.title.textContent = "";
    ui.meta.replaceChildren();
  }

  function closeConversation() {
    resetReader();
    reader.id = null;
    ui.conversation.hidden = true;
    ui.readerEmpty.hidden = false;
    document.body.classList.remove("reading");
    document.title = "Backscroll";
    markSelected();
  }

  function showReaderProblem(kind, message, retry) {
    resetReader();
    ui.readerEmpty.hidden = true;
    ui.conversation.hidden = false;
    document.body.classList.add("reading");
    ui.title.textContent = kind === "not-found" ? "Not found" : "Could not open this conversation";
    ui.readerState.append(text("p", message, kind === "not-found" || kind === "bad" ? "hint" : "error"));
    if (retry) {
      const button = text("button", "Retry", "quiet");
      button.type = "button";
      button.addEventListener("click", retry);
      ui.readerState.append(button);
    }
    ui.readerState.dataset.state = kind;
  }

  async function openConversation(id, messageId, session) {
    resetReader();
    const { signal } = reader.controller;
    reader.id = id;
    reader.messageId = messageId;
    ui.readerEmpty.hidden = true;
    ui.conversation.hidden = false;
    document.body.classList.add("reading");
    markSelected();
    ui.readerState.replaceChildren(text("span", "Loading conversation…", "spinner"));
    ui.readerState.dataset.state = "loading";
    if (session) renderHeader(session);
    try {
      // Always read it on its own: a list row can be minutes old, and a deep link has no row at all.
      renderHeader(await api(`/v1/agent-sessions/${id}`, null, signal));
      await loadMessages(id, signal, messageId ? MAX_PAGES_TO_FIND_HIT : 1);
    } catch (e) {
      if (isAbort(e) || reader.id !== id) return;
      if (endedByAuth(e)) return;
      if (e instanceof ApiError && e.status === 404) {
        showReaderProblem("not-found",
          `There is no conversation ${id} that you can see. It may have been deleted, or it is not shared with you.`);
      } else {
        showReaderProblem("error", e.message, () => openConversation(id, messageId, null));
      }
    }
  }

  function renderHeader(session) {
    ui.title.textContent = session.title || "Untitled conversation";
    ui.title.classList.toggle("untitled", !session.title);
    document.title = `${session.title || "Untitled conversation"} · Backscroll`;
    const creator = session.creator && typeof session.creator === "object" ? session.creator : null;
    const parts = [agentLabel(session), session.connector,
      creator ? `started by ${creator.display_name || creator.external_id}` : null]
      .filter((p) => typeof p === "string" && p);
    ui.meta.replaceChildren(parts.join(" · "), " · last active ", timeNode(session.last_active_at));
  }

  async function loadMessages(id, signal, pages) {
    for (let page = 0; page < pages; page += 1) {
      ui.readerState.dataset.state = "loading";
      const body = await api(`/v1/agent-sessions/${id}/messages`, { after: reader.next }, signal);
      if (reader.id !== id) return;
      for (const message of Array.isArray(body.messages) ? body.messages : []) {
        ui.messages.append(messageItem(message));
      }
      reader.next = typeof body.next === "string" ? body.next : null;
      if (reader.next === null || (reader.messageId && findMessage(reader.messageId))) break;
    }
    renderReaderState(id);
    if (reader.messageId) {
      const hit = findMessage(reader.messageId);
      if (hit) {
        hit.classList.add("matched");
        hit.scrollIntoView({ block: "center" });
      }
    }
  }

  function findMessage(id) {
    return ui.messages.querySelector(`li[data-id="${Number(id)}"]`);
  }

  function renderReaderState(id) {
    ui.readerState.replaceChildren();
    if (reader.next !== null) {
      ui.readerState.dataset.state = "more";
      const more = text("button", "Show more messages", "quiet");
      more.type = "button";
      more.addEventListener("click", async () => {
        more.disabled = true;
        try {
          await loadMessages(id, reader.controller.signal, 1);
        } catch (e) {
          if (isAbort(e) || endedByAuth(e)) return;
          ui.readerState.replaceChildren(text("p", `Could not load more messages: ${e.message}`, "error"));
          ui.readerState.dataset.state = "error";
        }
      });
      ui.readerState.append(more);
    } else if (ui.messages.children.length === 0) {
      ui.readerState.dataset.state = "empty";
      ui.readerState.append(text("p", "This conversation has no messages yet.", "hint"));
    } else {
      ui.readerState.dataset.state = "end";
    }
  }

  function messageItem(message) {
    const li = document.createElement("li");
    li.className = "message";
    li.dataset.id = String(message.id);
    li.dataset.role = String(message.role);
    li.id = `m${Number(message.id)}`;
    const head = document.createElement("div");
    head.className = "message-head";
    const speaker = message.speaker && typeof message.speaker === "object" ? message.speaker : null;
    const who = (speaker && (speaker.display_name || speaker.external_id)) || ROLES[message.role] || String(message.role);
    head.append(text("span", who, "speaker"));
    if (speaker) head.append(text("span", ROLES[message.role] || String(message.role), "role"));
    head.append(timeNode(message.created_at));
    if (message.state === "streaming") head.append(text("span", "still being written", "badge"));
    li.append(head);
    const body = text("div", typeof message.body === "string" ? message.body : "", "body");
    if (message.role === "tool") {
      // Tool results are mostly response bodies nobody reads; fold them.
      const details = document.createElement("details");
      details.append(text("summary", `Tool output (${body.textContent.length} characters)`), body);
      li.append(details);
    } else {
      li.append(body);
    }
    return li;
  }

  // ---------------------------------------------------------------------------------------------
  // Sign-in, keyboard, start.
  // ---------------------------------------------------------------------------------------------

  function signOut(message) {
    stopList();
    list = null;
    resetReader();
    reader.id = null;
    token = null;
    window.sessionStorage.removeItem(TOKEN_KEY);
    ui.list.replaceChildren();
    ui.q.value = "";
    ui.app.hidden = true;
    ui.signin.hidden = false;
    ui.signinError.textContent = message || "";
    ui.token.value = "";
    ui.token.focus();
  }

  async function signIn(candidate) {
    ui.signinError.textContent = "";
    if (!/^[\x21-\x7e]+$/.test(candidate)) {
      ui.signinError.textContent = "A token is one word of letters, digits and underscores (bks_reader_…).";
      return;
    }
    ui.signinButton.disabled = true;
    ui.signinButton.textContent = "Checking…";
    token = candidate;
    try {
      const who = await api("/v1/whoami");
      if (who.kind !== "reader") {
        token = null;
        ui.signinError.textContent = `That is a ${String(who.kind)} token; the sidebar reads with a reader token.`;
        return;
      }
      window.sessionStorage.setItem(TOKEN_KEY, candidate);
      ui.token.value = "";
      start();
    } catch (e) {
      token = null;
      ui.signinError.textContent = e instanceof ApiError && e.status === 401
        ? "That token was not accepted: check it was copied whole and has not been revoked."
        : `Could not sign in: ${e.message}`;
    } finally {
      ui.signinButton.disabled = false;
      ui.signinButton.textContent = "Sign in";
    }
  }

  function start() {
    ui.signin.hidden = true;
    ui.app.hidden = false;
    ui.signinError.textContent = "";
    startList(null);
    route();
  }

  function onSearchInput() {
    clearTimeout(searchTimer);
    const q = ui.q.value.trim() || null;
    if (list && q === list.q && !list.error && !list.pending) return;
    // What is on screen no longer answers what is typed: cancel its request now, not after the
    // debounce, and keep it from reading further pages meanwhile.
    if (list) {
      list.pending = true;
      stopList();
    }
    searchTimer = setTimeout(() => {
      searchTimer = null;
      startList(q);
    }, DEBOUNCE_MS);
  }

  function flushSearch() {
    if (searchTimer === null) return false;
    clearTimeout(searchTimer);
    searchTimer = null;
    startList(ui.q.value.trim() || null);
    return true;
  }

  function clearSearch() {
    clearTimeout(searchTimer);
    searchTimer = null;
    const had = ui.q.value !== "" || (list && list.q !== null);
    ui.q.value = "";
    if (had) startList(null);
  }

  function links() {
    return Array.from(ui.list.querySelectorAll("a.item-link"));
  }

  function move(delta) {
    const all = links();
    if (all.length === 0) return;
    const at = all.indexOf(document.activeElement);
    let next;
    if (at === -1) {
      const selected = all.findIndex((a) => a.getAttribute("aria-current") === "true");
      next = selected === -1 ? (delta > 0 ? 0 : all.length - 1) : selected + delta;
    } else {
      next = at + delta;
    }
    if (next < 0) {
      ui.q.focus();
      return;
    }
    next = Math.min(next, all.length - 1);
    all[next].focus();
    all[next].scrollIntoView({ block: "nearest" });
    if (next >= all.length - 3) loadMore();
  }

  function onKey(event) {
    if (ui.app.hidden || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    const typing = target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement
      || (target instanceof HTMLElement && target.isContentEditable);
    if (event.key === "/" && !typing) {
      event.preventDefault();
      ui.q.focus();
      ui.q.select();
    } else if (event.key === "Escape") {
      if (ui.q.value !== "" || (list && list.q !== null)) {
        event.preventDefault();
        clearSearch();
        ui.q.focus();
      } else if (document.body.classList.contains("reading")) {
        goBack();
      }
    } else if ((event.key === "ArrowDown" || event.key === "ArrowUp")
      && (target === ui.q || ui.sidebar.contains(target) || target === document.body)) {
      event.preventDefault();
      move(event.key === "ArrowDown" ? 1 : -1);
    } else if (event.key === "Enter" && target === ui.q) {
      event.preventDefault();
      if (!flushSearch()) {
        const first = links()[0];
        if (first) first.click();
      }
    }
  }

  function goBack() {
    const id = reader.id;
    if (window.location.pathname !== "/") window.history.pushState(null, "", "/");
    closeConversation();
    const row = id !== null ? ui.list.querySelector(`li[data-id="${Number(id)}"] a`) : null;
    if (row) row.focus();
  }

  ui.sidebar = $("sidebar");
  ui.signinForm.addEventListener("submit", (event) => {
    event.preventDefault();
    signIn(ui.token.value.trim());
  });
  ui.signout.addEventListener("click", () => signOut("Signed out. The token was forgotten in this tab."));
  ui.q.addEventListener("input", onSearchInput);
  ui.back.addEventListener("click", goBack);
  document.addEventListener("keydown", onKey);
  window.addEventListener("popstate", () => {
    if (token !== null) route();
  });
  new IntersectionObserver((entries) => {
    if (entries.some((entry) => entry.isIntersecting)) loadMore();
  }, { root: ui.scroller, rootMargin: "0px 0px 300px 0px" }).observe(ui.sentinel);

  token = window.sessionStorage.getItem(TOKEN_KEY);
  if (token) {
    start();
  } else {
    ui.signin.hidden = false;
    ui.token.focus();
  }
})();
