// azjax play page: draws the position the backend describes (`state`), sends the human's
// moves as env action ids and asks `move` for the AI's turn. No game lives here: the board is
// the env's grid of cells (`board`), a move is the env's clicks on it (`clicks`), the notation,
// names, legal moves, results and the AI all come from the backend. A game without a grid is
// shown as the env's text, with a button per legal action.
//
// The backend is `azjax serve`'s JSON API, or, in a page written by `azjax export --web`
// (`<meta name="azjax-backend" content="web">`), web.js answering the same questions in the
// browser from the exported game and model: the one page serves both.

const $ = (id) => document.getElementById(id);
let backend = null;      // { games(), state(request), move(request) }, answers as /api/...
let info = null;         // backend.games()
let game = null;         // { id, moves, human, position, picked, busy }
let generation = 0;      // a new game makes replies to the old one stale

async function api(path, body) {
  const response = await fetch(path, body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

const serverBackend = {
  games: () => api("api/games"),
  state: (request) => api("api/state", request),
  move: (request) => api("api/move", request),
};

async function chooseBackend() {
  const kind = document.querySelector('meta[name="azjax-backend"]')?.content || "server";
  if (kind !== "web") return serverBackend;
  const { webBackend } = await import("./web.js");
  return webBackend();
}

function setStatus(text, result) {
  $("status").textContent = text;
  if (result) $("status").dataset.result = result; else delete $("status").dataset.result;
}

async function start() {
  backend = await chooseBackend();
  window.azjax = { backend };  // the page's answers, for tests and the curious
  info = await backend.games();
  const params = new URLSearchParams(location.search);
  for (const [id, g] of Object.entries(info.games)) $("game").add(new Option(g.title, id));
  const labels = ["easy", "medium", "hard", "harder"];
  info.simulations.forEach((n, i) => {
    $("strength").add(new Option(`${labels[i] || ""} (${n} simulations)`, `s${n}`));
  });
  (info.movetimes || []).forEach((t) => {
    $("strength").add(new Option(`think ${t} s a move`, `t${t}`));
  });
  if (params.get("game")) $("game").value = params.get("game");
  $("strength").value = defaultStrength($("game").value);
  $("new-game").addEventListener("click", newGame);
  $("game").addEventListener("change", () => {
    $("strength").value = defaultStrength($("game").value);
    newGame();
  });
  $("first").addEventListener("change", newGame);  // the strength applies from the next AI move
  newGame();
}

/** The strength the page selects for a game: its model's own search where that is
 * alpha-beta (on the clock), else the default simulations. */
function defaultStrength(id) {
  const movetime = info.games[id].default_movetime;
  return movetime ? `t${movetime}` : `s${info.default_simulations}`;
}

function newGame() {
  generation += 1;
  const id = $("game").value;
  game = { id, moves: [], human: $("first").value === "human" ? 0 : 1,
           position: null, picked: [], busy: false };
  const g = info.games[id];
  $("model").textContent = `${g.title}: you play ${g.players[game.human]}, against ${g.model}.`;
  $("value").textContent = "–";
  $("top-moves").innerHTML = "";
  $("history").innerHTML = "";
  refresh();
}

function myTurn() {
  const p = game.position;
  return !game.busy && p && !p.terminated && p.current_player === game.human;
}

async function refresh() {
  const mine = generation;
  let position;
  try {
    position = await backend.state({ game: game.id, moves: game.moves });
  } catch (error) { setStatus(`Error: ${error.message}`); return; }
  if (mine !== generation) return;
  game.position = position;
  game.busy = false;
  game.picked = [];
  drawHistory(position.history);
  draw();
  if (position.terminated) {
    const w = position.winner_player;
    const result = w === null ? "draw" : (w === game.human ? "human" : "ai");
    setStatus({ draw: "Game over: a draw.", human: "Game over: you win!",
                ai: "Game over: the AI wins." }[result], result);
  } else if (position.current_player !== game.human) {
    aiTurn(mine);
  } else {
    // After one of the human's own actions the human moves again: their turn goes on.
    const turns = position.history;
    const goesOn = turns.length && turns[turns.length - 1].player === game.human;
    setStatus(goesOn ? "Your turn goes on: move again." : "Your move.");
  }
}

async function aiTurn(mine) {
  setStatus("The AI is thinking…");
  let reply;
  try {
    const strength = $("strength").value;
    const chosen = strength.startsWith("t") ? { movetime: Number(strength.slice(1)) }
                                            : { simulations: Number(strength.slice(1)) };
    reply = await backend.move({ game: game.id, moves: game.moves, ...chosen });
  } catch (error) { setStatus(`Error: ${error.message}`); return; }
  if (mine !== generation) return;
  game.moves = reply.moves;
  $("value").textContent = (reply.value >= 0 ? "+" : "") + reply.value.toFixed(2);
  $("searched").textContent = searchedNote(reply);
  const labels = info.games[game.id].labels;
  const top = reply.policy.map((p, a) => [p, a]).sort((x, y) => y[0] - x[0]).slice(0, 3);
  $("top-moves").innerHTML = "";
  for (const [p, a] of top) {
    if (p < 0.005) continue;
    const li = document.createElement("li");
    li.textContent = `${labels[a]}: ${(100 * p).toFixed(0)}% of the search's policy`;
    $("top-moves").appendChild(li);
  }
  refresh();
}

function searchedNote(reply) {
  // What the search behind the move looked at: alpha-beta counts positions and whole moves
  // deep, a tree search its simulations.
  if (reply.search === "alphabeta") {
    return `Searched ${reply.simulations.toLocaleString()} positions, ${reply.depth} moves deep ` +
      "(alpha-beta).";
  }
  const name = { gumbel: "Gumbel", puct: "PUCT" }[reply.search] || "tree";
  return `Searched ${reply.simulations.toLocaleString()} simulations (${name} search).`;
}

function drawHistory(turns) {
  $("history").innerHTML = "";
  for (const turn of turns) {
    const li = document.createElement("li");
    const who = turn.player === game.human ? "You" : "AI";
    li.textContent = `${who} ${turn.move}`;
    li.dataset.who = who;
    $("history").appendChild(li);
  }
}

function humanPlays(action) {
  if (!myTurn() || !game.position.legal.includes(action)) return;
  game.moves = [...game.moves, action];
  game.busy = true;  // until the new position is drawn
  setStatus("…");
  draw();
  refresh();
}

// ---- clicks: each legal action is a list of clicks, each click a set of cells ------------------

function candidates(picked) {
  // The legal actions (with their clicks) whose first clicks are the cells picked so far.
  const p = game.position;
  return p.legal.map((action, i) => ({ action, clicks: p.clicks[i] }))
    .filter((m) => m.clicks.length > picked.length &&
                   picked.every((cell, k) => m.clicks[k].includes(cell)));
}

function clickable(cell) {
  // A cell goes on from the cells picked so far, or starts another action afresh.
  if (!myTurn()) return false;
  const on = (picked) => candidates(picked).some((m) => m.clicks[picked.length].includes(cell));
  return on(game.picked) || (game.picked.length > 0 && on([]));
}

function clickCell(cell) {
  let picked = [...game.picked, cell];
  let matches = candidates(game.picked).filter((m) => m.clicks[game.picked.length].includes(cell));
  if (!matches.length) {  // not a continuation: start again from this cell
    picked = [cell];
    matches = candidates([]).filter((m) => m.clicks[0].includes(cell));
  }
  const complete = matches.find((m) => m.clicks.length === picked.length);
  if (complete) { humanPlays(complete.action); return; }
  game.picked = matches.length ? picked : [];
  draw();
}

// ---- drawing ----------------------------------------------------------------------------------

function textColour(background) {
  // Black or white text, whichever reads better on a "#rgb" / "#rrggbb" colour.
  const hex = background.replace("#", "");
  const full = hex.length === 3 ? [...hex].map((c) => c + c).join("") : hex;
  const [r, g, b] = [0, 2, 4].map((i) => parseInt(full.slice(i, i + 2), 16));
  return 0.299 * r + 0.587 * g + 0.114 * b > 150 ? "#000" : "#fff";
}

function draw() {
  const board = $("board");
  board.innerHTML = "";
  const view = game.position.board;
  $("text-board").textContent = view ? "" : game.position.text;
  $("text-board").hidden = Boolean(view);
  if (view) drawGrid(board, view); else drawMoveButtons(board);
}

function drawGrid(board, view) {
  board.className = `grid pieces-${view.pieces}`;
  board.style.gridTemplateColumns = `repeat(${view.cols}, var(--cell))`;
  for (const label of view.column_labels) {
    const header = document.createElement("div");
    header.className = "column-label";
    header.textContent = label;
    board.appendChild(header);
  }
  const targets = new Set(candidates(game.picked).flatMap((m) => m.clicks[game.picked.length]));
  const lastCells = new Set(game.position.last_cells);
  view.cells.forEach((cell, index) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = `cell${cell.shade ? " " + cell.shade : ""}`;
    b.dataset.cell = index;
    b.dataset.row = Math.floor(index / view.cols);
    b.dataset.col = index % view.cols;
    if (cell.note) b.insertAdjacentHTML("afterbegin", `<span class="note">${cell.note}</span>`);
    if (cell.player !== null) {
      const piece = document.createElement("span");
      const colour = view.colors[cell.player];
      piece.className = `piece p${cell.player}`;
      piece.textContent = cell.label;
      if (view.pieces === "disc") {
        piece.style.background = colour;
        piece.style.color = textColour(colour);
      } else {
        piece.style.color = colour;
      }
      b.appendChild(piece);
    }
    if (game.picked.includes(index)) b.classList.add("selected");
    else if (game.picked.length && targets.has(index)) b.classList.add("target");
    if (lastCells.has(index)) b.classList.add("last");
    b.disabled = !clickable(index);
    b.addEventListener("click", () => clickCell(index));
    board.appendChild(b);
  });
}

function drawMoveButtons(board) {
  board.className = "moves";
  board.style.gridTemplateColumns = "";
  const labels = info.games[game.id].labels;
  for (const action of game.position.legal) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "move";
    b.dataset.action = action;
    b.textContent = labels[action];
    b.disabled = !myTurn();
    b.addEventListener("click", () => humanPlays(action));
    board.appendChild(b);
  }
}

start().catch((error) => setStatus(`Error: ${error.message}`));
