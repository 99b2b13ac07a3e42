/* mianjing search: loaded by mj.js the first time the search box is used; fetches search/index.json.gz.

   Tokens: Latin words and numbers, with hyphenated/dotted compounds kept whole as well as split
   ("ZeRO-3" -> zero-3, zero, 3), lower-cased, plural s stripped; Chinese and Japanese text as
   overlapping character pairs ("信赖域" -> 信赖, 赖域), so no dictionary is needed on either side.
   Ranking: BM25 over weighted fields (title, topic and names, headings, text, the other language's
   text), favouring results that contain every query term and the query as a phrase.
   Highlighting: whole words, and whole runs of the query's Chinese, never single characters. */
(function () {
  "use strict";

  var WORD = /[\p{Script=Han}\u3040-\u30ff]+|[\p{L}\p{N}]+(?:[-_.+'’][\p{L}\p{N}]+)*/gu;
  var HAN = /^[\p{Script=Han}\u3040-\u30ff]/u;
  var FIELDS = { t: 6, o: 4, p: 3, k: 3, h: 2, s: 1, x: 0.7 };
  var K1 = 1.2, B = 0.5;

  function stem(w) {
    if (!/^[a-z]+$/.test(w) || w.length <= 3) return w;
    if (w.length > 4 && w.slice(-3) === "ies") return w.slice(0, -3) + "y";
    if (w.slice(-2) === "ss" || w.slice(-2) === "us" || w.slice(-2) === "is") return w;
    if (w.slice(-1) === "s") return w.slice(0, -1);
    return w;
  }

  /* the tokens of a text; each {t: token, c: compound?} */
  function tokens(text) {
    var out = [];
    var m;
    text = String(text).toLowerCase();
    WORD.lastIndex = 0;
    while ((m = WORD.exec(text))) {
      var w = m[0];
      if (HAN.test(w)) {
        if (w.length === 1) out.push(w);
        for (var i = 0; i + 1 < w.length; i++) out.push(w.slice(i, i + 2));
      } else {
        var parts = w.split(/[-_.+'’]/).filter(Boolean);
        if (parts.length > 1) {
          out.push(w.replace(/’/g, "'"));
          for (var j = 0; j < parts.length; j++) out.push(stem(parts[j]));
        } else {
          out.push(stem(w));
        }
      }
    }
    return out;
  }

  var docs = null, post = null, avgdl = 1, vocab = null;

  function add(map, tok, w) { map.set(tok, (map.get(tok) || 0) + w); }

  function build(data) {
    docs = data.docs;
    post = new Map();
    var total = 0;
    docs.forEach(function (d, i) {
      var tf = new Map();
      var len = 0;
      function field(text, w) { tokens(text).forEach(function (t) { add(tf, t, w); len += w > 1 ? 0 : 1; }); }
      field(d.t, FIELDS.t);
      field(d.o || "", FIELDS.o);
      field(d.p, FIELDS.p);
      field(d.k, FIELDS.k);
      d.s.forEach(function (s) { field(s[1], FIELDS.h); field(s[2], FIELDS.s); });
      field(d.x, FIELDS.x);
      d.len = Math.max(len, 20);
      d.titleTokens = new Set(tokens(d.t + " " + (d.o || "")));
      total += d.len;
      tf.forEach(function (w, t) {
        var list = post.get(t);
        if (!list) post.set(t, (list = []));
        list.push([i, w]);
      });
    });
    avgdl = total / Math.max(docs.length, 1);
    vocab = Array.from(post.keys()).sort();
  }

  function idf(df) { return Math.log(1 + (docs.length - df + 0.5) / (df + 0.5)); }

  /* tokens that start with `prefix` (the word being typed) */
  function expand(prefix) {
    var lo = 0, hi = vocab.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (vocab[mid] < prefix) lo = mid + 1; else hi = mid; }
    var out = [];
    for (var i = lo; i < vocab.length && vocab[i].indexOf(prefix) === 0 && out.length < 30; i++) if (vocab[i] !== prefix) out.push(vocab[i]);
    return out;
  }

  function search(q) {
    var qt = Array.from(new Set(tokens(q)));
    if (!qt.length || !docs) return [];
    var scores = new Map(), hits = new Map();
    var last = qt[qt.length - 1];
    var typing = /[\p{L}\p{N}]$/u.test(q) && !HAN.test(last) && last.length >= 3;
    qt.forEach(function (tok, qi) {
      var terms = [[tok, 1]];
      if (typing && tok === last) expand(tok).forEach(function (t) { terms.push([t, 0.4]); });
      var weight = tok.indexOf("-") > 0 || tok.indexOf(".") > 0 ? 1.5 : 1;  /* a compound is worth more */
      terms.forEach(function (tw) {
        var list = post.get(tw[0]);
        if (!list) return;
        var f = idf(list.length) * tw[1] * weight;
        list.forEach(function (p) {
          var d = docs[p[0]];
          var s = f * (p[1] * (K1 + 1)) / (p[1] + K1 * (1 - B + B * d.len / avgdl));
          scores.set(p[0], (scores.get(p[0]) || 0) + s);
          var h = hits.get(p[0]) || new Set();
          h.add(qi);
          hits.set(p[0], h);
        });
      });
    });
    var flat = function (x) { return x.toLowerCase().replace(/[-_]/g, " "); };
    var phrase = flat(q.trim());
    var out = [];
    scores.forEach(function (s, i) {
      var d = docs[i];
      var cover = hits.get(i).size / qt.length;
      var inTitle = qt.filter(function (t) { return d.titleTokens.has(t); }).length / qt.length;
      s *= cover * cover * (1 + 0.6 * inTitle);
      if (phrase.length > 1) {
        if (flat(d.t).indexOf(phrase) >= 0) s *= 1.6;
        else if (d.s.some(function (x) { return flat(x[2]).indexOf(phrase) >= 0; })) s *= 1.25;
      }
      out.push({ doc: d, score: s, cover: cover });
    });
    var full = out.filter(function (r) { return r.cover === 1; });
    out = (full.length ? full : out).sort(function (a, b) { return b.score - a.score; });
    return out;
  }

  /* ---------------------------------------------------------------- snippets and highlighting */
  function escapeHtml(s) { return s.replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); }
  function escapeRe(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  /* a regexp for the query's whole words and whole Chinese runs */
  function marker(q, text) {
    var alts = [];
    var m;
    var low = q.toLowerCase();
    WORD.lastIndex = 0;
    while ((m = WORD.exec(low))) {
      var w = m[0];
      if (HAN.test(w)) {
        if (text.indexOf(w) >= 0) { alts.push(escapeRe(w)); continue; }
        /* the longest pieces of the run that occur, two characters or more */
        for (var n = w.length - 1; n >= 2; n--) {
          for (var i = 0; i + n <= w.length; i++) if (text.indexOf(w.slice(i, i + n)) >= 0) alts.push(escapeRe(w.slice(i, i + n)));
          if (alts.length) break;
        }
      } else {
        alts.push(escapeRe(w) + "[\\p{L}]*");
        w.split(/[-_.+'’]/).forEach(function (p) { if (p.length > 1 && p !== w) alts.push(escapeRe(stem(p)) + "[\\p{L}]*"); });
      }
    }
    if (!alts.length) return null;
    alts.sort(function (a, b) { return b.length - a.length; });
    return new RegExp("(?<![\\p{L}\\p{N}])(?:" + alts.join("|") + ")(?![\\p{N}])", "giu");
  }

  function bestSection(d, qt) {
    var best = null, bestScore = -1;
    d.s.forEach(function (s) {
      var tf = new Map();
      tokens(s[1] + " " + s[2]).forEach(function (t) { tf.set(t, (tf.get(t) || 0) + 1); });
      var sc = 0;
      qt.forEach(function (t) { var c = tf.get(t); if (c) sc += (1 + Math.log(c)) * idf((post.get(t) || []).length); });
      if (sc > bestScore) { bestScore = sc; best = s; }
    });
    return best || ["", "", ""];
  }

  function snippet(text, re) {
    var at = 0;
    if (re) { re.lastIndex = 0; var m = re.exec(text); if (m) at = m.index; }
    var span = /[\u3400-\u9fff]/.test(text.slice(at, at + 40)) ? 50 : 90;
    var start = Math.max(0, at - span), end = Math.min(text.length, at + 2 * span);
    var piece = (start > 0 ? "…" : "") + text.slice(start, end) + (end < text.length ? "…" : "");
    return mark(piece, re);
  }

  function mark(text, re) {
    if (!re) return escapeHtml(text);
    var out = "", last = 0, m;
    re.lastIndex = 0;
    while ((m = re.exec(text))) {
      if (!m[0].length) { re.lastIndex++; continue; }
      out += escapeHtml(text.slice(last, m.index)) + "<mark>" + escapeHtml(m[0]) + "</mark>";
      last = m.index + m[0].length;
    }
    return out + escapeHtml(text.slice(last));
  }

  /* ---------------------------------------------------------------- the box */
  var input, list, meta, base, lang, hint;
  var MSG = {
    zh: { none: "没有找到结果", one: "1 个结果", many: "{n} 个结果", loading: "正在加载索引…", failed: "搜索索引无法加载" },
    en: { none: "No results", one: "1 result", many: "{n} results", loading: "Loading the index…", failed: "The search index could not be loaded" },
  };

  function url(d, anchor) { return base + d.u + (anchor ? "#" + anchor : ""); }

  function results(q) {
    return search(q).map(function (r) {
      return { url: r.doc.u, n: r.doc.n, title: r.doc.t, score: r.score };
    });
  }

  function show() {
    var q = input.value.trim();
    var msg = MSG[lang] || MSG.en;
    list.innerHTML = "";
    if (!q) { meta.textContent = hint; return; }
    var found = search(q);
    meta.textContent = !found.length ? msg.none : found.length === 1 ? msg.one : msg.many.replace("{n}", found.length);
    var qt = Array.from(new Set(tokens(q)));
    found.slice(0, 12).forEach(function (r) {
      var d = r.doc;
      var sec = bestSection(d, qt);
      var re = marker(q, d.t + " " + sec[1] + " " + sec[2]);
      var li = document.createElement("li");
      li.className = "md-search-result__item";
      li.innerHTML = '<a href="' + escapeHtml(url(d, sec[0])) + '" class="md-search-result__link" tabindex="-1">' +
        '<article class="md-search-result__article md-typeset mj-hit">' +
        "<h1>" + (d.n ? '<span class="mj-hit-no">' + d.n + ".</span> " : "") + mark(d.t, re) + "</h1>" +
        (d.p ? '<p class="mj-hit-where">' + escapeHtml(d.p) + (sec[1] ? " › " + mark(sec[1], re) : "") + "</p>" : "") +
        "<p>" + snippet(sec[2] || d.x, re) + "</p></article></a>";
      list.appendChild(li);
    });
  }

  function init(el) {
    input = el;
    var box = input.closest("[data-mj-search]");
    list = box.querySelector(".md-search-result__list");
    meta = box.querySelector("[data-mj-meta]");
    hint = meta.textContent;
    base = input.getAttribute("data-base");
    lang = document.documentElement.lang.slice(0, 2);
    meta.textContent = (MSG[lang] || MSG.en).loading;
    return fetch(input.getAttribute("data-index")).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.arrayBuffer();
    }).then(function (buf) {
      var bytes = new Uint8Array(buf);
      if (bytes[0] === 0x1f && bytes[1] === 0x8b) {  /* gzip, unless the host already unpacked it */
        var stream = new Blob([buf]).stream().pipeThrough(new DecompressionStream("gzip"));
        return new Response(stream).text();
      }
      return new TextDecoder().decode(bytes);
    }).then(function (text) {
      build(JSON.parse(text));
      var timer = null;
      input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(show, 60); });
      input.form.addEventListener("reset", function () { setTimeout(show, 0); });
      input.addEventListener("keydown", function (ev) {
        var links = Array.prototype.slice.call(list.querySelectorAll("a"));
        if (ev.key === "Enter" && links.length) { ev.preventDefault(); location.href = links[0].href; }
        if (ev.key === "ArrowDown" && links.length) { ev.preventDefault(); links[0].focus(); }
      });
      list.addEventListener("keydown", function (ev) {
        var links = Array.prototype.slice.call(list.querySelectorAll("a"));
        var i = links.indexOf(document.activeElement);
        if (ev.key === "ArrowDown" && i + 1 < links.length) { ev.preventDefault(); links[i + 1].focus(); }
        if (ev.key === "ArrowUp") { ev.preventDefault(); if (i > 0) links[i - 1].focus(); else input.focus(); }
      });
      list.addEventListener("click", function (ev) {
        if (ev.target.closest("a")) { var t = document.getElementById("__search"); if (t) t.checked = false; }
      });
      show();
    }).catch(function (err) {
      meta.textContent = (MSG[lang] || MSG.en).failed + " (" + err.message + ")";
      throw err;
    });
  }

  window.mjSearch = { init: init, query: results, tokens: tokens };
})();
