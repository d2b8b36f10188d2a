/* agentsgym view: the episode list, filters and one episode's view.
 *
 * The data is the JSON in <script id="agentsgym-data">. Only the selected episode is
 * drawn (in an env with roles, beside the other roles of its game: e.game, the rows
 * Python's side_by_side chose, a column each), and the list and the token view are
 * drawn in chunks, so that a file of thousands of episodes stays responsive. Episode
 * text is always inserted with textContent, never parsed as HTML (search matches are
 * <mark> elements made here).
 * The filter rules mirror agentsgym_viewer/filtering.py (EpisodeFilter.matches);
 * whether an episode is wrong is judged in Python (ViewedEpisode.wrong) and embedded. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("agentsgym-data").textContent);
  var EPISODES = DATA.episodes;
  var LIST_CHUNK = 300;
  var TOKEN_CHUNK = 4000;
  var COLORS = { zero: [80, 120, 220], pos: [26, 150, 60], neg: [210, 50, 50] };
  var byIndex = {};
  EPISODES.forEach(function (e, pos) { byIndex[e.i] = pos; });

  var $ = function (id) { return document.getElementById(id); };
  var state = { shown: [], limit: LIST_CHUNK, selected: null };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmtReward(x) {
    if (x === null || x === undefined) return "";
    var s = Number(x.toPrecision(4)).toString();
    return x >= 0 ? "+" + s : s;
  }

  function rewardSpan(x) {
    return el("span", "reward" + (x > 0 ? " pos" : x < 0 ? " neg" : ""), fmtReward(x));
  }

  function haystack(e) {
    if (e._hay === undefined) {
      var parts = [e.env || "", e.sid || "", e.err === null ? "" : e.err, e.tj];
      e.msgs.forEach(function (m) {  // content, then its tool calls (as Python's search_text)
        parts.push(m[1]);
        m[2].forEach(function (call) { parts.push(call); });
      });
      e._hay = parts.join("\n").toLowerCase();
    }
    return e._hay;
  }

  // Non-overlapping matches of the lower-cased needle, as Python's str.count counts.
  function countMatches(e, needle) {
    var hay = haystack(e), count = 0, at = 0;
    if (!needle) return 0;
    while ((at = hay.indexOf(needle, at)) >= 0) { count++; at += needle.length; }
    return count;
  }

  // Episode text with the matches of the search box in <mark>s, all as text nodes.
  function marked(tag, cls, text) {
    var node = el(tag, cls);
    var needle = $("f-search").value.toLowerCase();
    text = String(text);
    var lower = text.toLowerCase();
    if (!needle || lower.length !== text.length) {  // lower-casing moved offsets: no marks
      node.textContent = text;
      return node;
    }
    var at = 0, next;
    while ((next = lower.indexOf(needle, at)) >= 0) {
      node.appendChild(document.createTextNode(text.slice(at, next)));
      node.appendChild(el("mark", null, text.slice(next, next + needle.length)));
      at = next + needle.length;
    }
    node.appendChild(document.createTextNode(text.slice(at)));
    return node;
  }

  function readFilters() {
    var min = $("f-min").value.trim(), max = $("f-max").value.trim();
    return {
      env: $("f-env").value || null,
      min: min === "" || isNaN(Number(min)) ? null : Number(min),
      max: max === "" || isNaN(Number(max)) ? null : Number(max),
      failed: $("f-failed").checked,
      wrong: $("f-wrong").checked,
      search: $("f-search").value
    };
  }

  function matches(e, f) {
    if (f.env !== null && e.env !== f.env) return false;
    if (f.min !== null && e.r < f.min) return false;
    if (f.max !== null && e.r > f.max) return false;
    if (f.failed && e.err === null) return false;
    if (f.wrong && !e.wrong) return false;
    if (f.search && haystack(e).indexOf(f.search.toLowerCase()) < 0) return false;
    return true;
  }

  function tags(e, parent) {
    if (e.err !== null) parent.appendChild(el("span", "tag failed", e.unscored ? "failed, no reward" : "failed"));
    if (e.trunc) parent.appendChild(el("span", "tag truncated", "truncated"));
    if (e.cut) parent.appendChild(el("span", "tag truncated", "reply cut"));
    if (e.free) parent.appendChild(el("span", "tag", "free shot"));
    if (e.correct === true) parent.appendChild(el("span", "tag correct", "correct"));
    if (e.correct === false) parent.appendChild(el("span", "tag wrong", "wrong"));
  }

  function place(e) {
    var parts = [];
    if (e.task !== null) parts.push("task " + e.task);
    if (e.rollout !== null) parts.push("rollout " + e.rollout);
    if (e.ep) parts.push("episode " + e.ep);
    if (e.nseg > 1) parts.push("segment " + (e.seg + 1) + "/" + e.nseg);
    if (e.role) parts.push("role " + e.role);
    return parts.join(" \u00b7 ");
  }

  // ------------------------------------------------------------------ the list
  function applyFilters() {
    var f = readFilters();
    state.shown = [];
    for (var k = 0; k < EPISODES.length; k++) if (matches(EPISODES[k], f)) state.shown.push(k);
    state.limit = LIST_CHUNK;
    $("count").textContent = state.shown.length + " of " + EPISODES.length + " episodes";
    drawList();
  }

  // When "failed only" finds nothing but answers are wrong: wrong answers are not failures.
  function wrongHint() {
    var f = readFilters();
    if (!f.failed) return "";
    f.failed = false;
    f.wrong = true;
    var count = 0;
    for (var k = 0; k < EPISODES.length; k++) if (matches(EPISODES[k], f)) count++;
    if (!count) return "";
    return "None failed (ended with an error), but " + count + (count === 1 ? " has an answer" :
      " have answers") + " judged wrong: check \u201cwrong only\u201d to see them.";
  }

  function drawList() {
    var list = $("list");
    list.textContent = "";
    if (!state.shown.length) {
      var none = el("div", "none", "No episode matches these filters.");
      var hint = wrongHint();
      if (hint) none.appendChild(el("span", "hint", hint));
      list.appendChild(none);
      return;
    }
    var frag = document.createDocumentFragment();
    var upto = Math.min(state.limit, state.shown.length);
    for (var k = 0; k < upto; k++) frag.appendChild(listItem(EPISODES[state.shown[k]]));
    list.appendChild(frag);
    if (upto < state.shown.length) {
      var more = el("button", "more", "show " + Math.min(LIST_CHUNK, state.shown.length - upto) +
        " more (" + (state.shown.length - upto) + " not listed)");
      more.type = "button";
      more.onclick = function () { state.limit += LIST_CHUNK; drawList(); };
      list.appendChild(more);
    }
  }

  function listItem(e) {
    var item = el("div", "item" + (state.selected === e.i ? " selected" : ""));
    item.dataset.i = e.i;
    item.tabIndex = 0;
    var top = el("div", "top");
    top.appendChild(el("span", "env", "#" + e.i + " " + (e.env || "(env unknown)")));
    top.appendChild(rewardSpan(e.r));
    item.appendChild(top);
    var sub = el("div", "sub", place(e) + " \u00b7 " + e.turns + " turns");
    tags(e, sub);
    item.appendChild(sub);
    item.onclick = function () { select(e.i); };
    return item;
  }

  // ------------------------------------------------------------------ one episode
  function select(index) {
    if (byIndex[index] === undefined) return;
    state.selected = index;
    var items = $("list").querySelectorAll(".item");
    for (var k = 0; k < items.length; k++) {
      items[k].classList.toggle("selected", Number(items[k].dataset.i) === index);
    }
    drawEpisode(EPISODES[byIndex[index]]);
    if (history.replaceState) history.replaceState(null, "", "#ep=" + index);
  }

  // One episode, or the roles of its game side by side: a column per role (the game's
  // rows embedded in this page, in file order), each its own view and rewards.
  function drawEpisode(e) {
    var detail = $("detail");
    detail.textContent = "";
    detail.scrollTop = 0;
    if (!e.game) {
      drawOne(e, detail, true);
      return;
    }
    var game = el("div", "game");
    game.style.gridTemplateColumns = "repeat(" + e.game.length + ", minmax(0, 1fr))";
    e.game.forEach(function (index) {
      var column = el("section", "lane" + (index === e.i ? " current" : ""));
      column.dataset.i = index;
      drawOne(EPISODES[byIndex[index]], column, false);
      game.appendChild(column);
    });
    detail.appendChild(game);
  }

  function drawOne(e, detail, alone) {
    var title = el("h2", null, "#" + e.i + "  ");
    title.appendChild(e.env ? marked("span", null, e.env) : el("span", null, "(env unknown)"));
    title.appendChild(document.createTextNode("  "));
    title.appendChild(el("span", "muted", place(e)));
    tags(e, title);
    detail.appendChild(title);
    var search = $("f-search").value;
    if (search) detail.appendChild(searchCount(e, search));

    var meta = el("dl", "meta");
    function row(name, value, cls) {
      meta.appendChild(el("dt", null, name));
      var dd = el("dd", cls || null);
      if (value instanceof Node) dd.appendChild(value); else dd.textContent = value;
      meta.appendChild(dd);
    }
    row("final reward", rewardSpan(e.r));
    row("turns", e.turns);
    row("truncated", e.tt, e.trunc || e.cut ? "warn" : null);
    if (e.err !== null) row("error", marked("span", null, e.err), "error");
    var terms = Object.keys(e.terms);
    if (terms.length) row("reward by source", termsNode(e.terms));
    // a game's role gives no answer: the row is left out rather than say "none"
    if (DATA.kind === "eval" && (e.answer !== null || e.role === null)) {
      row("answer", e.answer === null ? "none given" : e.answer);
    }
    if (e.graded === false) row("graded", "no (a grader could not judge it)");
    if (e.sid) row("session", marked("span", null, e.sid));
    row("task", marked("span", null, e.tj));
    detail.appendChild(meta);

    var turn = 0;
    e.msgs.forEach(function (m) {
      var role = m[0];
      var box = el("div", "msg " + role);
      box.appendChild(el("div", "role", m[3]));
      if (m[1] || !m[2].length) box.appendChild(marked("div", "content", m[1]));
      m[2].forEach(function (call) {
        var line = el("div", "call");
        line.appendChild(el("span", "call-label", "call "));
        line.appendChild(marked("span", null, call));
        box.appendChild(line);
      });
      if (role === "assistant") {
        box.appendChild(stepNode(e, turn));
        turn += 1;
      }
      detail.appendChild(box);
    });
    if (!e.msgs.length) {
      detail.appendChild(el("p", "muted", "No messages: the episode failed before its first prompt."));
    }
    if (e.tok) detail.appendChild(tokenSection(e, alone));
  }

  // The terminal's line: how many matches of the search box the episode has, or none.
  function searchCount(e, search) {
    var count = countMatches(e, search.toLowerCase());
    var text = "search \u201c" + search + "\u201d: " + (count ? count + (count > 1 ? " matches" :
      " match") + " in this episode" : "no match in this episode (env id, session, error, " +
      "task data, messages)");
    return el("p", "search-count" + (count ? "" : " none"), text);
  }

  function termsNode(terms) {
    var span = el("span");
    Object.keys(terms).forEach(function (name, k) {
      if (k) span.appendChild(document.createTextNode(", "));
      span.appendChild(document.createTextNode(name + " "));
      span.appendChild(rewardSpan(terms[name]));
    });
    return span;
  }

  function stepNode(e, turn) {
    var step = e.steps[turn];
    if (!step) return el("div", "step missing", "no step recorded (the episode failed at this turn)");
    var div = el("div", "step");
    div.appendChild(el("b", null, "step " + turn));
    if (step[2].reply_truncated) {
      div.appendChild(el("span", "warn", "  reply cut at the generation limit"));
    }
    if (step[0] !== null) {
      div.appendChild(document.createTextNode("  reward "));
      div.appendChild(rewardSpan(step[0]));
    }
    if (Object.keys(step[1]).length) {
      div.appendChild(document.createTextNode("  terms "));
      div.appendChild(termsNode(step[1]));
    }
    if (e.tr) {
      div.appendChild(document.createTextNode("  reward on its " + e.tc[turn] + " tokens "));
      div.appendChild(rewardSpan(e.tr[turn]));
    }
    if (Object.keys(step[2]).length) {
      div.appendChild(document.createTextNode("  info "));
      div.appendChild(el("span", "info", JSON.stringify(step[2])));
    }
    step[3].forEach(function (judgement) { div.appendChild(judgementNode(judgement)); });
    return div;
  }

  // A judge model's judgement of the step: [score, model, reused, prompt, reply].
  function judgementNode(j) {
    var box = el("div", "judgement");
    var head = el("div");
    head.appendChild(el("b", null, "judge"));
    if (j[0] !== null) {
      head.appendChild(document.createTextNode("  score "));
      head.appendChild(rewardSpan(j[0]));
    }
    if (j[1] !== null) head.appendChild(el("span", "muted", "  model " + j[1]));
    if (j[2]) head.appendChild(el("span", "muted", "  (the answer of an earlier request with the same prompt)"));
    box.appendChild(head);
    if (j[3] !== null) {
      var prompt = el("details");
      prompt.appendChild(el("summary", null, "prompt"));
      prompt.appendChild(el("pre", "judge-prompt", j[3]));
      box.appendChild(prompt);
    }
    if (j[4] !== null) {
      var reply = el("div");
      reply.appendChild(el("b", null, "reply "));
      reply.appendChild(el("pre", "judge-reply", j[4]));
      box.appendChild(reply);
    }
    return box;
  }

  // ------------------------------------------------------------------ tokens
  function tokenSection(e, alone) {
    var tok = e.tok;
    var section = el("div", "tokens-section");
    if (alone) section.id = "tokens-section";
    var agent = 0;
    for (var k = 0; k < tok.mask.length; k++) if (tok.mask.charCodeAt(k) === 49) agent++;
    section.appendChild(el("h3", null, "Tokens: " + tok.ids.length + ", " + agent + " by the agent \u00b7 " +
      (DATA.decoded ? "tokenizer " + DATA.tokenizer : "ids (no tokenizer)")));
    var legend = el("div", "legend");
    [["env / template", "var(--env-b)"], ["agent, reward 0", rgba(COLORS.zero, 0.55)],
     ["agent, reward > 0", rgba(COLORS.pos, 0.55)], ["agent, reward < 0", rgba(COLORS.neg, 0.55)]]
      .forEach(function (pair) {
        var s = el("span", null, pair[0]);
        s.style.background = pair[1];
        legend.appendChild(s);
      });
    section.appendChild(legend);
    var box = el("div", "tokens" + (DATA.decoded ? "" : " ids"));
    section.appendChild(box);
    var rewards = {};
    var peak = 0;
    tok.rw.forEach(function (p) { rewards[p[0]] = p[1]; peak = Math.max(peak, Math.abs(p[1])); });
    var drawn = 0;
    function more() {
      var end = Math.min(drawn + TOKEN_CHUNK, tok.ids.length);
      var frag = document.createDocumentFragment();
      for (var pos = drawn; pos < end; pos++) frag.appendChild(tokenSpan(tok, pos, rewards, peak));
      box.appendChild(frag);
      drawn = end;
      if (button) {
        if (drawn >= tok.ids.length) button.remove();
        else button.textContent = "show more tokens (" + (tok.ids.length - drawn) + " left)";
      }
    }
    var button = null;
    if (tok.ids.length > TOKEN_CHUNK) {
      button = el("button", "tokens-more");
      button.type = "button";
      button.onclick = more;
      section.appendChild(button);
    }
    more();
    return section;
  }

  function rgba(c, a) { return "rgba(" + c[0] + "," + c[1] + "," + c[2] + "," + a.toFixed(3) + ")"; }

  function tokenSpan(tok, pos, rewards, peak) {
    var id = tok.ids[pos];
    var agent = tok.mask.charCodeAt(pos) === 49;
    var reward = rewards[pos] || 0;
    var text = DATA.decoded ? DATA.vocab[id] : String(id) + " ";
    if (text === undefined) text = "<" + id + "?>";
    var span = el("span", agent ? "a" : "e" + (pos % 2), text.replace(/\n/g, "\u21b5\n"));
    if (agent) {
      var color = reward > 0 ? COLORS.pos : reward < 0 ? COLORS.neg : COLORS.zero;
      var strength = peak > 0 && reward !== 0 ? Math.abs(reward) / peak : 0;
      span.style.background = rgba(color, (0.3 + 0.5 * strength) * (pos % 2 ? 0.8 : 1));
    }
    span.title = "#" + pos + " id " + id + (agent ? " agent, reward " + fmtReward(reward) : " env");
    return span;
  }

  // ------------------------------------------------------------------ wiring
  function init() {
    var file = $("file");
    file.textContent = DATA.file + "  ";
    file.appendChild(el("span", "muted", DATA.kind + " file \u00b7 " + EPISODES.length + " episodes" +
      (DATA.num_rows !== EPISODES.length ? " (of " + DATA.num_rows + " rows)" : "")));
    if (DATA.run) {
      $("run").hidden = false;
      $("run").textContent = "run: " + DATA.run;
    }
    $("f-search").value = DATA.search;
    DATA.envs.forEach(function (env) {
      var option = el("option", null, env);
      option.value = env;
      $("f-env").appendChild(option);
    });
    if (DATA.warnings.length) {
      var w = $("warnings");
      w.hidden = false;
      var ul = el("ul");
      DATA.warnings.forEach(function (text) { ul.appendChild(el("li", null, text)); });
      w.appendChild(ul);
    }
    ["f-env", "f-failed", "f-wrong"].forEach(function (id) {
      $(id).addEventListener("change", applyFilters);
    });
    ["f-min", "f-max"].forEach(function (id) { $(id).addEventListener("input", applyFilters); });
    $("f-search").addEventListener("input", function () { applyFilters(); redrawSelected(); });
    $("f-reset").onclick = function () {
      $("filters").reset();
      applyFilters();
      redrawSelected();
    };
    document.addEventListener("keydown", function (ev) {
      var typing = /INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName);
      if (ev.key === "/" && !typing) { ev.preventDefault(); $("f-search").focus(); return; }
      if (typing) return;
      if (ev.key === "j" || ev.key === "ArrowDown") { move(1); ev.preventDefault(); }
      if (ev.key === "k" || ev.key === "ArrowUp") { move(-1); ev.preventDefault(); }
    });
    applyFilters();
    var fromHash = /^#ep=(\d+)$/.exec(location.hash);
    // A page of one episode (--episode N) shows it even when its search has no match.
    var start = fromHash && byIndex[Number(fromHash[1])] !== undefined ? Number(fromHash[1])
      : state.shown.length ? EPISODES[state.shown[0]].i : EPISODES.length === 1 ? EPISODES[0].i : null;
    if (start !== null) select(start);
  }

  function redrawSelected() {
    if (state.selected !== null) drawEpisode(EPISODES[byIndex[state.selected]]);
  }

  function move(delta) {
    if (!state.shown.length) return;
    var positions = state.shown.map(function (k) { return EPISODES[k].i; });
    var at = positions.indexOf(state.selected);
    var next = at < 0 ? 0 : Math.max(0, Math.min(positions.length - 1, at + delta));
    if (next >= state.limit) { state.limit = next + 1; drawList(); }
    select(positions[next]);
    var item = $("list").querySelector('.item[data-i="' + positions[next] + '"]');
    if (item) item.scrollIntoView({ block: "nearest" });
  }

  window.agentsgymViewer = {
    shown: function () { return state.shown.map(function (k) { return EPISODES[k].i; }); },
    select: select
  };
  init();
})();
