// azjax play page: draws the position the server describes (/api/state), sends the human's
// moves as env action ids and asks /api/move for the AI's turn. No rules live here: legal
// moves, results and the AI all come from the server.
"use strict";

const $ = (id) => document.getElementById(id);
const NAMES = {
  tic_tac_toe: ["Tic-tac-toe", "X", "O"],
  connect_four: ["Connect four", "Red", "Yellow"],
  draughts: ["Draughts", "Black", "White"],
};
let info = null;         // /api/games
let game = null;         // { id, moves, human, simulations, position, selected, last }
let generation = 0;      // a new game makes replies to the old one stale

async function api(path, body) {
  const response = await fetch(path, body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function setStatus(text, result) {
  $("status").textContent = text;
  if (result) $("status").dataset.result = result; else delete $("status").dataset.result;
}

async function start() {
  info = await api("/api/games");
  const params = new URLSearchParams(location.search);
  for (const id of Object.keys(info.games)) {
    $("game").add(new Option(NAMES[id] ? NAMES[id][0] : id, id));
  }
  const labels = ["easy", "medium", "hard", "harder"];
  info.simulations.forEach((n, i) => {
    $("strength").add(new Option(`${labels[i] || ""} (${n} simulations)`, n));
  });
  $("strength").value = info.default_simulations;
  if (params.get("game")) $("game").value = params.get("game");
  $("new-game").addEventListener("click", newGame);
  $("game").addEventListener("change", newGame);
  $("first").addEventListener("change", newGame);  // the strength applies from the next AI move
  newGame();
}

function newGame() {
  generation += 1;
  const id = $("game").value;
  game = { id, moves: [], human: $("first").value === "human" ? 0 : 1,
           position: null, selected: null, last: [],
           pending: [], busy: false };
  const names = NAMES[id] || [id, "player 0", "player 1"];
  $("model").textContent = `${names[0]}: you play ${names[1 + game.human]}, against ` +
    `${info.games[id].model}.`;
  $("value").textContent = "–";
  $("top-moves").innerHTML = "";
  $("history").innerHTML = "";
  refresh();
}

async function refresh() {
  const mine = generation;
  let position;
  try {
    position = await api("/api/state", { game: game.id, moves: game.moves });
  } catch (error) { setStatus(`Error: ${error.message}`); return; }
  if (mine !== generation) return;
  game.position = position;
  game.busy = false;
  draw();
  if (position.terminated) {
    const w = position.winner_player;
    const result = w === null ? "draw" : (w === game.human ? "human" : "ai");
    setStatus({ draw: "Game over: a draw.", human: "Game over: you win!",
                ai: "Game over: the AI wins." }[result], result);
  } else if (position.current_player !== game.human) {
    game.pending = [];
    aiTurn(mine);
  } else {
    // The human still moves after one of their own actions: a multi-jump goes on.
    setStatus(game.pending.length ? "Your capture goes on: jump again." : "Your move.");
  }
}

async function aiTurn(mine) {
  setStatus("The AI is thinking…");
  let reply;
  try {
    reply = await api("/api/move", { game: game.id, moves: game.moves,
                                     simulations: Number($("strength").value) });
  } catch (error) { setStatus(`Error: ${error.message}`); return; }
  if (mine !== generation) return;
  game.moves = reply.moves;
  game.last = reply.ai_moves;
  addHistory(reply.ai_moves, "AI");
  $("value").textContent = (reply.value >= 0 ? "+" : "") + reply.value.toFixed(2);
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

function formatTurn(actions) {
  const labels = info.games[game.id].labels;
  if (game.id !== "draughts") return actions.map((a) => labels[a]).join(" ");
  const hops = actions.map((a) => labels[a].split(/[-x]/));
  const sep = labels[actions[0]].includes("x") ? "x" : "-";
  return [hops[0][0], ...hops.map((h) => h[1])].join(sep);
}

function addHistory(actions, who) {
  const li = document.createElement("li");
  li.textContent = `${who} ${formatTurn(actions)}`;
  li.dataset.who = who;
  $("history").appendChild(li);
}

function humanPlays(action) {
  if (game.busy || !game.position || game.position.terminated) return;
  if (game.position.current_player !== game.human) return;
  if (!game.position.legal.includes(action)) return;
  game.moves = [...game.moves, action];
  game.pending = [...game.pending, action];
  game.last = game.pending;
  game.selected = null;
  game.busy = true;  // until the new position is drawn
  if (game.pending.length > 1) {
    $("history").lastChild.textContent = `You ${formatTurn(game.pending)}`;
  } else {
    addHistory([action], "You");
  }
  setStatus("…");
  refresh();
}

function cellButton(classes, action, text) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = `cell ${classes}`;
  button.textContent = text;
  const myTurn = !game.position.terminated && game.position.current_player === game.human;
  if (action !== null) {
    button.dataset.action = action;
    button.disabled = !(myTurn && game.position.legal.includes(action));
    button.addEventListener("click", () => humanPlays(action));
  }
  return button;
}

function draw() {
  const board = $("board");
  board.innerHTML = "";
  board.className = "grid";
  ({ tic_tac_toe: drawTicTacToe, connect_four: drawConnectFour, draughts: drawDraughts })[
    game.id](board, game.position);
}

function drawTicTacToe(board, position) {
  board.classList.add("ttt");
  position.board.forEach((v, i) => {
    const b = cellButton(v >= 0 ? `p${v}` : "", i, v < 0 ? "" : "XO"[v]);
    if (v < 0) b.insertAdjacentHTML("afterbegin", `<span class="label">${i + 1}</span>`);
    if (game.last.includes(i) && v >= 0) b.classList.add("last");
    board.appendChild(b);
  });
}

function drawConnectFour(board, position) {
  board.classList.add("c4");
  for (let c = 0; c < 7; c++) board.appendChild(cellButton("column", c, String(c + 1)));
  // The last move's cell: the highest stone in its column.
  const lastCol = game.last.length ? game.last[game.last.length - 1] : -1;
  let lastRow = -1;
  if (lastCol >= 0) for (let r = 5; r >= 0; r--) if (position.board[r * 7 + lastCol] >= 0) lastRow = r;
  position.board.forEach((v, i) => {
    const slot = cellButton(`slot${v >= 0 ? " p" + v : ""}`, i % 7, "");
    slot.setAttribute("aria-label", `column ${(i % 7) + 1}`);
    if (Math.floor(i / 7) === lastRow && i % 7 === lastCol) slot.classList.add("last");
    board.appendChild(slot);
  });
}

function draughtsActions(position) {
  // Legal actions as {from, to, action} in PDN squares, parsed from the labels "9-13" / "9x18".
  const labels = info.games.draughts.labels;
  return position.legal.map((a) => {
    const [from, to] = labels[a].split(/[-x]/).map(Number);
    return { from, to, action: a };
  });
}

function drawDraughts(board, position) {
  board.classList.add("draughts");
  const moves = draughtsActions(position);
  const myTurn = !position.terminated && position.current_player === game.human;
  for (let row = 0; row < 8; row++) {
    for (let col = 0; col < 8; col++) {
      const dark = (row + col) % 2 === 1;
      if (!dark) {
        const light = document.createElement("div");
        light.className = "sq light";
        board.appendChild(light);
        continue;
      }
      const square = row * 4 + Math.floor(col / 2) + 1;
      const v = position.board[square - 1];
      const b = cellButton("sq dark", null, "");
      b.dataset.square = square;
      b.insertAdjacentHTML("afterbegin", `<span class="label">${square}</span>`);
      if (v !== 0) {
        const piece = document.createElement("span");
        piece.className = `piece ${v > 0 ? "black" : "white"}`;
        piece.textContent = Math.abs(v) === 2 ? "K" : "";
        b.appendChild(piece);
      }
      const from = moves.filter((m) => m.from === square);
      const to = moves.filter((m) => m.from === game.selected && m.to === square);
      if (square === game.selected) b.classList.add("selected");
      if (to.length) b.classList.add("target");
      b.disabled = !myTurn || (!from.length && !to.length);
      b.addEventListener("click", () => {
        if (to.length) { humanPlays(to[0].action); return; }
        game.selected = from.length ? square : null;
        draw();
      });
      board.appendChild(b);
    }
  }
}

start().catch((error) => setStatus(`Error: ${error.message}`));
