// culture_probe results board: plain JavaScript, no framework, no network. The data files in data/ call CP_DATA;
// views are chosen by the URL's hash: #run/<id>, #compare/<id>, or the leaderboard.
"use strict";

const store = { board: null, run: {}, items: {}, cands: {}, compare: {} };
const LIST_SIZE = 50; // items shown per page of the item list

function CP_DATA(kind, key, value) {
  if (kind === "board") store.board = value;
  else store[kind][key] = value;
}
window.CP_DATA = CP_DATA;

const pending = {};
function load(src) {
  // A script element loads from file:// where a JSON request is refused; each file is loaded once.
  if (!pending[src]) {
    pending[src] = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = resolve;
      script.onerror = () => reject(new Error("cannot load " + src));
      document.head.appendChild(script);
    });
  }
  return pending[src];
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function table(columns, rows, attrs) {
  return el("table", attrs, el("thead", {}, el("tr", {}, columns.map((c) => el("th", {}, c)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, row.map((c) => el("td", { dir: "auto" }, c))))));
}

function select(id, label, options, value, onchange) {
  return el("label", { class: "filter" }, label + " ",
    el("select", { id: id, onchange: (e) => onchange(e.target.value) },
      options.map(([v, text]) => el("option", { value: v, selected: v === value }, text))));
}

function badge(text, kind) {
  return el("span", { class: "badge " + (kind || text.split(" ")[0].toLowerCase()) }, text);
}

function main() {
  return document.getElementById("main");
}

function add(...children) {
  // append to the view, leaving out what a condition did not produce
  main().append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function route() {
  const [view, ...rest] = location.hash.replace(/^#/, "").split("/");
  const id = decodeURIComponent(rest.join("/"));
  main().replaceChildren();
  window.scrollTo(0, 0);
  const shown = view === "run" ? showRun(id) : view === "compare" ? showCompare(id) : showBoard();
  Promise.resolve(shown).catch((error) => add(el("p", { class: "error" }, String(error))));
}
window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", route);

// ------------------------------------------------------------------ leaderboard

const boardState = { benchmark: "", language: "", sort: "model", descending: false };

function showBoard() {
  const board = store.board;
  document.title = board.title;
  const columns = board.leaderboard.columns;
  const benchmarks = [...new Set(columns.map((c) => c.benchmark))];
  const languages = [...new Set(columns.flatMap((c) => c.languages))].sort();
  const host = el("div", { id: "leaderboard-view" });
  const draw = () => host.replaceChildren(leaderboardTable(board.leaderboard));
  add(
    el("h1", {}, "Leaderboard"),
    el("p", { class: "note" },
      "The headline number of each config, with its 95% interval and n (units as the benchmark counts them). " +
      "Click a value column to sort; a cell opens its run. Smoke runs probe a subset: not the benchmark's number."),
    el("div", { class: "filters" },
      select("benchmark-filter", "Benchmark", [["", "all"], ...benchmarks.map((b) => [b, b])], boardState.benchmark,
        (v) => { boardState.benchmark = v; draw(); }),
      select("language-filter", "Language", [["", "all (overall)"], ...languages.map((l) => [l, l])],
        boardState.language, (v) => { boardState.language = v; draw(); })),
    host,
    el("h2", {}, "Runs"),
    table(["run", "config", "model", "protocol", "records", ""], board.runs.map((r) => [
      el("a", { href: "#run/" + encodeURIComponent(r.id) }, r.id), r.config, r.model, r.protocol,
      r.records.toLocaleString("en"), [r.smoke ? badge("smoke") : null, r.shard ? badge("shard") : null, r.status ? badge(r.status, "incomplete") : null],
    ]), { id: "runs" }),
    el("h2", {}, "Comparisons"),
    board.comparisons.length
      ? el("ul", { id: "comparisons" }, board.comparisons.map((c) => el("li", {},
        el("a", { href: "#compare/" + encodeURIComponent(c.id) }, c.config + ": " + c.base + " vs " + c.other))))
      : el("p", { class: "note" }, "No two runs of one config on the same rows."));
  draw();
}

function cellOf(row, column) {
  const cell = row.cells[column.config];
  if (!cell) return null;
  const estimate = boardState.language ? cell.by_language[boardState.language] : cell.overall;
  return { cell, estimate };
}

function leaderboardTable(data) {
  const columns = data.columns.filter((c) =>
    (!boardState.benchmark || c.benchmark === boardState.benchmark) &&
    (!boardState.language || c.languages.includes(boardState.language)));
  const value = (row) => {
    if (boardState.sort === "model") return row.model + " " + row.protocol;
    const found = cellOf(row, { config: boardState.sort });
    return found && found.estimate ? found.estimate.value : null;
  };
  const rows = [...data.rows].sort((a, b) => {
    const x = value(a), y = value(b);
    if (x === null || y === null) return (x === null) - (y === null); // missing numbers last, either way
    const order = x < y ? -1 : x > y ? 1 : 0;
    return boardState.descending ? -order : order;
  });
  const sortBy = (key) => () => {
    boardState.descending = boardState.sort === key ? !boardState.descending : key !== "model";
    boardState.sort = key;
    document.getElementById("leaderboard").replaceWith(leaderboardTable(data));
  };
  const arrow = (key) => (boardState.sort === key ? (boardState.descending ? " ▼" : " ▲") : "");
  const head = el("thead", {},
    el("tr", {}, el("th", { rowspan: 2, class: "sortable", "data-sort": "model", onclick: sortBy("model") },
      "model" + arrow("model")), el("th", { rowspan: 2 }, "protocol"),
    columns.map((c) => el("th", { colspan: 3, class: "group" }, c.config, el("br"),
      el("small", {}, c.benchmark + (boardState.language ? ", " + boardState.language : ""))))),
    el("tr", {}, columns.map((c) => [
      el("th", { class: "sortable", "data-sort": c.config, onclick: sortBy(c.config) },
        (firstMetric(data, c) || "headline") + arrow(c.config)),
      el("th", {}, "95% interval"), el("th", {}, "n (" + (c.unit || "units") + ")")])));
  const body = el("tbody", {}, rows.map((row) => el("tr", { class: "model-row", "data-model": row.model },
    el("td", { class: "model" }, row.model), el("td", {}, row.protocol),
    columns.map((c) => {
      const found = cellOf(row, c);
      if (!found || !found.estimate) return [el("td", { class: "value empty" }, "–"), el("td"), el("td")];
      const { cell, estimate } = found;
      return [
        el("td", { class: "value" }, el("a", { href: "#run/" + encodeURIComponent(cell.run) }, estimate.text),
          cell.smoke ? badge("smoke") : null, cell.shard ? badge("shard") : null, cell.status ? badge(cell.status, "incomplete") : null,
          (cell.others || []).map((other) => [" ", el("a", { href: "#run/" + encodeURIComponent(other), class: "other",
            title: "another run of this model and config" }, "+")])),
        el("td", { class: "interval" }, estimate.interval), el("td", { class: "n" }, String(estimate.n))];
    }))));
  return el("table", { id: "leaderboard", class: "leaderboard" }, head, body);
}

function firstMetric(data, column) {
  for (const row of data.rows) {
    const cell = row.cells[column.config];
    if (cell && cell.overall) return cell.overall.metric;
  }
  return null;
}

// ------------------------------------------------------------------ a run

async function showRun(id) {
  await load("data/run-" + id + ".js");
  const data = store.run[id];
  const page = data.page;
  document.title = page.config + " on " + page.model;
  add(
    el("h1", {}, page.config + " on " + page.model),
    el("ul", { class: "facts" },
      page.status ? el("li", {}, badge(page.status, "incomplete"), " the run did not finish: numbers cover the probes answered so far") : null,
      page.shard ? el("li", {}, badge("shard"), " " + page.shard) : null,
      page.smoke ? el("li", {}, badge("smoke"), " " + page.smoke) : null,
      el("li", {}, "benchmark: " + page.benchmark),
      el("li", {}, "model: " + page.model + " (" + page.kind + ")"),
      el("li", {}, "protocol profile: " + page.protocol),
      el("li", {}, "run: ", el("code", {}, page.run))),
    el("h2", {}, "Numbers"),
    el("p", { class: "note" }, page.methods),
    table(["group", "metric", "value", "95% interval", "n"],
      page.numbers.map((x) => [x.group, x.metric, x.text, x.interval, String(x.n)]), { id: "numbers" }),
    Object.entries(page.omitted).map(([name, why]) => el("p", { class: "note" }, name + " is not reported: " + why)),
    el("h2", {}, "Deviations from the original code"),
    page.deviations.length
      ? table(["id", "description", "applies to", "side", "upstream's side"],
        page.deviations.map((d) => [d.id, d.description, d.when, d.side, d.upstream]), { id: "deviations" })
      : el("p", {}, "None concerns this run."),
    el("h2", {}, "Figures"),
    page.figures.length
      ? el("div", { class: "figures" }, page.figures.map((src) => el("img", { src: src, alt: src.split("/").pop() })))
      : el("p", { class: "note" }, "No figure (matplotlib was not installed when the report was written)."),
    el("h2", {}, "Reproduce"),
    page.reproduce.notes.map((text) => el("p", { class: "note" }, text)),
    el("pre", { id: "reproduce" }, page.reproduce.command),
    el("h2", { id: "items-title" }, "Items"));
  if (data.withheld) add(el("p", { class: "note", id: "withheld" }, data.withheld));
  else itemBrowser(id, data);
}

function itemBrowser(id, data) {
  const index = data.index;
  const n = index.keys.length;
  const state = { facets: index.facets.map(() => ""), outcome: "", search: "", page: 0 };
  const list = el("div", { id: "item-list" });
  const draw = () => list.replaceChildren(...itemList(id, data, matching(index, state), state, draw));
  const filters = index.facets.map((facet, i) =>
    select("facet-" + facet.name, facet.name, [["", "all"], ...facet.labels.map((l, j) => [String(j), l])], "",
      (v) => { state.facets[i] = v; state.page = 0; draw(); }));
  const outcomes = index.outcomes.map((o, i) => [String(i), o]);
  add(
    el("p", { class: "note" }, "Every record of the run (" + n.toLocaleString("en") + "). Right or wrong is the item's " +
      "value of the headline metric (" + (index.metric || "none") + "). Open an item for the exact input the model " +
      "got, its candidates, and every field of its record."),
    index.prompts_missing ? el("p", { class: "note", id: "prompts-missing" }, "Prompts: " + index.prompts_missing) : null,
    el("div", { class: "filters" }, filters,
      select("outcome-filter", "outcome", [["", "all"], ...outcomes], "",
        (v) => { state.outcome = v; state.page = 0; draw(); }),
      el("label", { class: "filter" }, "search ", el("input", { id: "item-search", type: "search",
        oninput: (e) => { state.search = e.target.value.toLowerCase(); state.page = 0; draw(); } }))),
    list);
  draw();
}

function matching(index, state) {
  const out = [];
  const facets = state.facets.map((v) => (v === "" ? -1 : Number(v)));
  const outcome = state.outcome === "" ? -1 : Number(state.outcome);
  for (let i = 0; i < index.keys.length; i++) {
    if (outcome >= 0 && index.outcome[i] !== outcome) continue;
    if (facets.some((v, f) => v >= 0 && index.facets[f].codes[i] !== v)) continue;
    if (state.search && !(index.keys[i] + " " + index.answer[i] + " " + index.gold[i]).toLowerCase().includes(state.search)) continue;
    out.push(i);
  }
  return out;
}

function itemList(id, data, found, state, draw) {
  const index = data.index;
  const pages = Math.max(1, Math.ceil(found.length / LIST_SIZE));
  state.page = Math.min(state.page, pages - 1);
  const shown = found.slice(state.page * LIST_SIZE, (state.page + 1) * LIST_SIZE);
  const turn = (step) => () => { state.page += step; draw(); };
  const rows = shown.flatMap((i) => {
    const detail = el("tr", { class: "detail", hidden: true }, el("td", { colspan: index.facets.length + 4 }));
    const open = () => {
      detail.hidden = !detail.hidden;
      if (!detail.hidden && !detail.firstChild.firstChild) showItem(id, data, i, detail.firstChild);
    };
    return [el("tr", { class: "item", "data-index": i, onclick: open },
      el("td", { dir: "auto" }, index.keys[i]),
      index.facets.map((f) => el("td", { dir: "auto" }, f.labels[f.codes[i]])),
      el("td", {}, badge(index.outcomes[index.outcome[i]])),
      el("td", { dir: "auto", class: "answer" }, index.answer[i]),
      el("td", { dir: "auto", class: "gold" }, index.gold[i])), detail];
  });
  return [
    el("p", { id: "item-count" }, found.length.toLocaleString("en") + " of " + index.keys.length.toLocaleString("en") +
      " records", " · page " + (state.page + 1) + " of " + pages + " ",
      el("button", { id: "prev-page", onclick: turn(-1), disabled: state.page === 0 }, "previous"),
      el("button", { id: "next-page", onclick: turn(1), disabled: state.page >= pages - 1 }, "next")),
    el("table", { id: "items", class: "items" },
      el("thead", {}, el("tr", {}, el("th", {}, "item"), index.facets.map((f) => el("th", {}, f.name)),
        el("th", {}, "outcome"), el("th", {}, "answer"), el("th", {}, "gold"))),
      el("tbody", {}, rows)),
  ];
}

async function showItem(id, data, i, host) {
  const number = Math.floor(i / data.page_size);
  await load("data/items-" + id + "-" + number + ".js");
  const record = store.items[id + "/" + number][i % data.page_size];
  const prompt = record.prompt;
  if (prompt && prompt.kind === "score") await load("data/cands-" + id + ".js");
  host.replaceChildren(el("div", { class: "card" },
    el("p", {}, badge(record.outcome), " " + record.key + " · stage " + record.stage + " · " + record.probe +
      (record.value !== null ? " · headline value " + record.value : "")),
    promptView(prompt, store.cands[id], data.index.prompts_missing),
    el("h4", {}, "Record (items.jsonl)"),
    table(["field", "value"], Object.entries(record.fields).map(([k, v]) =>
      [k, typeof v === "string" ? v : JSON.stringify(v)]), { class: "fields" })));
}

function promptView(prompt, sets, missing) {
  if (!prompt) return el("p", { class: "note" }, "No rebuilt prompt: " + (missing || "the protocol built no such probe"));
  const notes = [];
  if (prompt.chat) notes.push("sent as the user turn of the model's chat template" + (prompt.system ? ", after the system turn:" : ""));
  const system = prompt.system ? el("pre", { class: "prompt system", dir: "auto" }, prompt.system) : null;
  if (prompt.kind === "skipped") return el("p", { class: "note" }, "Not asked: " + prompt.reason);
  if (prompt.kind === "generate") {
    return el("div", {}, el("h4", {}, "Prompt (generated from, up to " + prompt.max_new_tokens + " new tokens)"),
      notes.map((t) => el("p", { class: "note" }, t)), system, el("pre", { class: "prompt", dir: "auto" }, prompt.text));
  }
  if (prompt.kind === "fill_mask") {
    return el("div", {}, el("h4", {}, "Prompt (the best piece at the mask)"),
      el("pre", { class: "prompt", dir: "auto" }, prompt.left, el("span", { class: "slot" }, "[MASK]")));
  }
  const candidates = sets[prompt.candidates];
  const sep = prompt.sep === null ? "one space unless the text before ends in one or its script writes none"
    : prompt.sep === "" ? "no separator" : "separator " + JSON.stringify(prompt.sep);
  const few = candidates.slice(0, 40);
  const all = el("div", { class: "candidates", dir: "auto" }, few.join(" · "),
    candidates.length > few.length ? el("button", { class: "more", onclick: (e) => {
      e.target.parentNode.replaceChildren(candidates.join(" · "));
    } }, "all " + candidates.length) : null);
  return el("div", {},
    el("h4", {}, "Prompt (each candidate scored in the slot; " + sep + ")"),
    notes.map((t) => el("p", { class: "note" }, t)), system,
    el("pre", { class: "prompt", dir: "auto" }, prompt.left + (prompt.sep || ""),
      el("span", { class: "slot" }, "[candidate]"), prompt.right),
    el("h4", {}, "Candidates (" + prompt.n_candidates + "; their scores are in the record below)"), all);
}

// ------------------------------------------------------------------ a comparison

async function showCompare(id) {
  await load("data/compare-" + id + ".js");
  const data = store.compare[id];
  // the runs in one order everywhere: base first, as the columns of the numbers name them
  const name = (side) => [el("a", { href: "#run/" + encodeURIComponent(side.id) }, side.id),
    side.status ? [" ", badge(side.status, "incomplete")] : null];
  document.title = "compare " + data.config + ": " + data.base.id + " vs " + data.other.id;
  add(
    el("h1", {}, data.config + ": ", name(data.base), " vs ", name(data.other)),
    [data.base, data.other].some((s) => s.smoke) ? el("p", {}, badge("smoke"), " a smoke run: not the benchmark's number") : null,
    [data.base, data.other].filter((s) => s.status).map((s) =>
      el("p", {}, badge(s.status, "incomplete"), " " + s.id + " did not finish: its numbers cover the probes answered so far")),
    el("h2", {}, "Numbers"),
    table(data.columns, data.rows, { id: "lined-up" }),
    data.single ? el("p", { class: "note", id: "single" }, data.single) : null,
    el("h2", {}, "Paired differences (" + data.other.id + " minus " + data.base.id + ", same items)"),
    data.problem ? el("p", { class: "error" }, data.problem) : null,
    table(["metric", "group", "difference", "95% interval", "p", "p (Holm)", "n", "procedure"],
      data.paired.map((p) => [p.metric, p.group, p.difference, p.interval, p.p, p.p_holm, String(p.n), p.method]), { id: "paired" }),
    data.multiplicity ? el("p", { class: "note", id: "multiplicity" }, data.multiplicity) : null,
    (data.left_out || []).map((text) => el("p", { class: "note" }, text)),
    el("h2", {}, "Items that changed (" + data.n_changed.toLocaleString("en") + ")"),
    data.changed === null
      ? el("p", { class: "note" }, "Left out: this benchmark's data is released only on request.")
      : table(["item", data.base.id, data.other.id],
        data.changed.slice(0, 500).map((c) => [c.id, c.base, c.other]), { id: "changed" }),
    data.changed && data.changed.length > 500 ? el("p", { class: "note" }, "The first 500 are listed.") : null);
}
