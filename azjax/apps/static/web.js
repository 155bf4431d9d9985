// The page's backend in a folder written by `azjax export --web`: it answers what `azjax
// serve`'s API answers (/api/games, /api/state, /api/move), in the browser, from the exported
// game (game/game.json and its ONNX graphs, run by onnxruntime-web), search.js and, for a model
// that searches by alpha-beta, alphabeta.js (at the page's times per move). No game is
// written here: the rules, the board codes and the network are the game's and model's own
// functions, exported from their JAX code (azjax/apps/web_export.py says what each graph is).

import * as ort from "./ort/ort.wasm.min.mjs";
import { runAlphaBeta } from "./alphabeta.js";
import { runSearch } from "./search.js";

const ILLEGAL_LOGIT = -1e9;  // as azjax.core.search.masked_logits
const WARM_UP_SLICES = 15;  // the runtime's warm-up: 1.5 s of search, in slices of 0.1 s
const WARM_UP_SLICE_S = 0.1;
const ARRAYS = {
  bool: Uint8Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, float32: Float32Array,
};
// And "steps" for an alpha-beta model whose game's step batches, "table" with a table.
const GRAPHS = ["describe", "step", "tree_step", "network"];

function tensor(dtype, values, dims) {
  const Array = ARRAYS[dtype];
  if (!Array) throw new Error(`a state leaf of dtype ${dtype} cannot enter the page`);
  return new ort.Tensor(dtype, values instanceof Array ? values : Array.from(values), dims);
}

/** The exported game: its graphs as async functions of states (arrays of ort tensors). */
class ExportedGame {
  constructor(meta, runners) {
    this.meta = meta;
    this.runners = runners;  // graph name -> its onnxruntime instance
    this.initial = meta.state.map((leaf) => tensor(leaf.dtype, leaf.initial, leaf.shape));
    this.cache = new Map([["", this.initial]]);  // move list -> state, for replays
    this.queue = Promise.resolve();  // the graphs' runs, in order (run())
  }

  /** Graph `name` on `feeds`, one run at a time: the page's requests and a search may
   * overlap (a warm-up search runs while the human thinks), and each graph's runtime runs
   * one call at a time. */
  run(name, feeds) {
    const result = this.queue.then(() => this.runners[name].run(feeds));
    this.queue = result.catch(() => {});
    return result;
  }

  feeds(state, action) {
    const feeds = {};
    this.meta.state.forEach((leaf, i) => { feeds[leaf.name] = state[i]; });
    if (action !== undefined) feeds.action = new ort.Tensor("int32", Int32Array.of(action), []);
    return feeds;
  }

  nextState(outputs) {
    return this.meta.state.map((leaf) => outputs[`next_${leaf.name}`]);
  }

  async describe(state) {
    const out = await this.run("describe", this.feeds(state));
    return {
      codes: out.codes.data, obs: out.obs, legal: out.legal.data,
      player: out.player.data[0], done: Boolean(out.done.data[0]), rewards: out.rewards.data,
      forcing: Boolean(out.forcing.data[0]),
    };
  }

  async step(state, action) {
    return this.nextState(await this.run("step", this.feeds(state, action)));
  }

  /** Masked policy logits and value of an observation with its legal mask. */
  async evaluate(obs, legal) {
    return (await this.evaluateMany([obs], [legal]))[0];
  }

  /** evaluate() of several observations, in one network call. */
  async evaluateMany(observations, legals) {
    const size = observations[0].data.length;
    const data = new Float32Array(observations.length * size);
    observations.forEach((obs, j) => data.set(obs.data, j * size));
    const input = new ort.Tensor("float32", data,
                                 [observations.length, ...this.meta.observation_shape]);
    const out = await this.run("network", { obs: input });
    const A = this.meta.num_actions;
    return legals.map((legal, j) => ({
      logits: Float32Array.from(out.logits.data.subarray(j * A, (j + 1) * A),
                                (x, a) => (legal[a] ? x : ILLEGAL_LOGIT)),
      value: out.value.data[j],
    }));
  }

  /** The search's model (search.js): the root and one step of its tree. */
  searchModel() {
    return {
      root: async (state) => {
        const d = await this.describe(state);
        return { ...(await this.evaluate(d.obs, d.legal)), legal: d.legal };
      },
      recurrent: async (state, action) => {
        const out = await this.run("tree_step", this.feeds(state, action));
        const next = this.nextState(out);
        let [reward, discount] = [out.reward.data[0], out.discount.data[0]];
        const known = out.known ? out.known.data[0] : true;  // whether to ask table.onnx
        const ended = discount !== 0 && known && await this.tableResult(next);
        if (ended) {  // the table ends the line: its result for the mover
          [reward, discount] = [discount === 1 ? ended.value : -ended.value, 0];
        }
        const { logits, value } = await this.evaluate(out.obs, out.legal.data);
        return { reward, discount, logits, value: discount === 0 ? 0 : value, state: next };
      },
    };
  }

  /** Alpha-beta's model (alphabeta.js): a position, or those after some moves (step.onnx
   * for one, steps.onnx for more, which describe them too), with their table keys and the
   * network's values and logits (one call for them all; not asked of a finished game). */
  alphaBetaModel() {
    const positions = async (described) => {
      const live = described.filter((d) => !d.done);
      const nets = live.length
        ? await this.evaluateMany(live.map((d) => d.obs), live.map((d) => d.legal)) : [];
      let k = 0;
      return described.map((d) => ({
        state: d.state, key: stateKey(d.state), player: d.player, done: d.done,
        reward: d.rewards[d.player], forcing: d.forcing, legal: d.legal,
        ...(d.done ? { value: 0, logits: null } : nets[k++]),
      }));
    };
    return {
      root: async (state) => (await positions([{ state, ...(await this.describe(state)) }]))[0],
      children: async (state, actions) => {
        const described = await this.steppedMany(state, actions);
        for (const d of described) {
          const ended = !d.done && d.known && await this.tableResult(d.state);
          if (ended) {  // the table ends the line with its result
            d.done = true;
            d.rewards = d.player === 0 ? [ended.value, -ended.value]
              : [-ended.value, ended.value];
          }
        }
        return positions(described);
      },
    };
  }

  /** The position after `action`, from one step.onnx call: its state and what describe()
   * says of it but the board codes. */
  async stepped(state, action) {
    return this.steppedMany(state, [action]).then((found) => found[0]);
  }

  /** stepped() of each of `actions`: one step.onnx call for one, steps.onnx for more, each
   * call `steps_batch` of them (the last repeated to fill it; without steps.onnx, one
   * step.onnx call each). */
  async steppedMany(state, actions) {
    const batch = actions.length === 1 ? 1 : this.meta.steps_batch;
    const found = [];
    for (let i = 0; i < actions.length; i += batch) {
      const chunk = actions.slice(i, i + batch);
      let out;
      if (batch === 1) out = await this.run("step", this.feeds(state, chunk[0]));
      else {
        const feeds = this.feeds(state);
        const padded = Int32Array.from({ length: batch },
                                       (_, j) => chunk[Math.min(j, chunk.length - 1)]);
        feeds.actions = new ort.Tensor("int32", padded, [batch]);
        out = await this.run("steps", feeds);
      }
      chunk.forEach((_, j) => found.push(this.described(out, j, batch)));
    }
    return found;
  }

  /** Row `j` of `batch` of step.onnx's or steps.onnx's outputs: the state and what
   * describe() says of it but the board codes. */
  described(out, j, batch) {
    const row = (t) => {
      const size = t.data.length / batch;
      return new ort.Tensor(t.type, t.data.slice(j * size, (j + 1) * size),
                            batch === 1 ? t.dims : t.dims.slice(1));
    };
    return {
      state: this.meta.state.map((leaf) => row(out[`next_${leaf.name}`])), obs: row(out.obs),
      legal: row(out.legal).data, player: out.player.data[j], done: Boolean(out.done.data[j]),
      rewards: row(out.rewards).data, forcing: Boolean(out.forcing.data[j]),
      known: out.known ? Boolean(out.known.data[j]) : true,  // whether to ask table.onnx
    };
  }

  /** The endgame table's result for a live position it knows ({value} for the player to
   * move), else null (always, without a table). */
  async tableResult(state) {
    if (!this.runners.table) return null;
    const out = await this.run("table", this.feeds(state));
    return out.known.data[0] ? { value: out.value.data[0] } : null;
  }

  /** The table's move at a root it knows whose every legal move ends the game or reaches a
   * position it knows: the best exact result (the quickest win, the longest resistance),
   * the lowest action among equals; else null (azjax.core.endgames.table_root_actions). */
  async tableMove(state) {
    if (!(await this.tableResult(state))) return null;
    const root = await this.describe(state);
    const actions = [...root.legal.keys()].filter((action) => root.legal[action]);
    const children = await this.steppedMany(state, actions);  // in steps.onnx's batches
    let [best, bestValue] = [null, -Infinity];
    for (const [i, action] of actions.entries()) {
      const child = children[i];
      let value = child.rewards[root.player];
      if (!child.done) {
        const ended = child.known && await this.tableResult(child.state);
        if (!ended) return null;
        value = child.player === root.player ? ended.value : -ended.value;
      }
      if (value > bestValue) [best, bestValue] = [action, value];
    }
    return best;
  }

  /** The positions along `moves` (the initial one first); an error names an illegal move. */
  async positions(moves) {
    const states = [this.initial];
    for (let i = 0; i < moves.length; i += 1) {
      const key = moves.slice(0, i + 1).join(",");
      let next = this.cache.get(key);
      if (!next) {
        const d = await this.describe(states[i]);
        const move = moves[i];
        if (d.done || !Number.isInteger(move) || !d.legal[move]) {
          throw new Error(`illegal move list: move ${i} (${move}) is not legal there`);
        }
        next = await this.step(states[i], move);
        this.cache.set(key, next);
      }
      states.push(next);
    }
    return states;
  }

  /** A turn's notation: one action's label, or several chained or spaced (`move_chain`). */
  formatTurn(actions) {
    const names = actions.map((a) => this.meta.labels[a]);
    const chain = this.meta.move_chain;
    if (!chain || names.length === 1) return names.join(" ");
    const hops = names.map((name) => name.split(chain));
    return [hops[0][0], ...hops.map((hop) => hop[hop.length - 1])].join(chain);
  }
}

/** A string naming a state exactly: its leaves' values. */
function stateKey(state) {
  return state.map((leaf) => Array.prototype.join.call(leaf.data, ",")).join("|");
}

function winnerOf(d) {
  if (!d.done) return null;
  if (d.rewards[0] > 0) return 0;
  return d.rewards[1] > 0 ? 1 : null;
}

async function loadGame() {
  const meta = await (await fetch("game/game.json")).json();
  ort.env.wasm.wasmPaths = new URL("./ort/", import.meta.url).href;
  ort.env.wasm.numThreads = 1;  // threads need a cross-origin-isolated page; a plain host is not
  const runners = {};
  const names = [...GRAPHS, ...(meta.steps_batch > 1 ? ["steps"] : []),
                 ...(meta.search.endgame_table ? ["table"] : [])];
  for (const name of names) {
    runners[name] = await ort.InferenceSession.create(`game/${name}.onnx`,
                                                       { executionProviders: ["wasm"] });
  }
  return new ExportedGame(meta, runners);
}

/** The backend app.js plays through; its answers have the shapes of `azjax serve`'s API. */
export async function webBackend() {
  const g = await loadGame();
  const meta = g.meta;
  const search = meta.search;
  const defaultSimulations = search.strengths.includes(search.num_simulations)
    ? search.num_simulations : search.strengths[0];
  // A time per move becomes simulations at the speed this page has measured (milliseconds
  // per simulation, the mean of its searches so far): a page has no compiled chunks to stop
  // between, so it plans the count Gumbel's halving needs from the clock.
  const speed = { ms: 0, simulations: 0 };

  async function timedSearch(model, state, options, movetime) {
    if (!speed.simulations) {  // a first, short search measures the speed
      const started = performance.now();
      await runSearch(model, state, { ...options, numSimulations: 16 });
      speed.ms += performance.now() - started;
      speed.simulations += 16;
    }
    const perSimulation = speed.ms / speed.simulations;
    const numSimulations = Math.max(1, Math.floor((1000 * movetime) / perSimulation));
    const started = performance.now();
    const out = await runSearch(model, state, { ...options, numSimulations });
    speed.ms += performance.now() - started;
    speed.simulations += numSimulations;
    return out;
  }

  function checkGame(request) {
    if (request.game !== meta.id) throw new Error(`unknown game ${request.game}; games: ${meta.id}`);
  }

  async function state(request) {
    checkGame(request);
    const moves = request.moves || [];
    const positions = await g.positions(moves);
    const described = await Promise.all(positions.map((s) => g.describe(s)));
    const now = described[described.length - 1];
    const turns = [];
    moves.forEach((action, i) => {
      const player = described[i].player;
      if (turns.length && turns[turns.length - 1].player === player) {
        turns[turns.length - 1].actions.push(action);
      } else turns.push({ player, actions: [action] });
    });
    for (const turn of turns) turn.move = g.formatTurn(turn.actions);
    const legal = now.done ? [] : [...now.legal.keys()].filter((a) => now.legal[a]);
    const cells = Array.from(now.codes, (code) => meta.board.cells[code]);
    let lastCells = [];
    if (turns.length) {
      const before = described[described.length - 1 - turns[turns.length - 1].actions.length];
      lastCells = [...now.codes.keys()].filter((i) => before.codes[i] !== now.codes[i]);
    }
    return {
      game: meta.id, moves, board: { ...meta.board.frame, cells },
      clicks: legal.map((a) => meta.clicks[a]), legal, history: turns, last_cells: lastCells,
      current_player: now.player, terminated: now.done, winner_player: winnerOf(now), text: "",
    };
  }

  async function move(request) {
    checkGame(request);
    warming = false;
    await warmed;
    const movetime = request.movetime;
    const simulations = request.simulations ?? defaultSimulations;
    if (movetime !== undefined && !search.movetimes.includes(movetime)) {
      throw new Error(`movetime must be one of ${search.movetimes.join(", ")}`);
    }
    if (movetime === undefined && !search.strengths.includes(simulations)) {
      throw new Error(`simulations must be one of ${search.strengths.join(", ")}`);
    }
    const moves = [...(request.moves || [])];
    const positions = await g.positions(moves);
    let current = positions[positions.length - 1];
    let d = await g.describe(current);
    if (d.done) throw new Error("the game is already over after these moves");
    const ai = d.player;
    const aiMoves = [];
    let first = null;
    while (!d.done && d.player === ai) {
      const out = await think(current, simulations, movetime);
      first = first || out;
      aiMoves.push(out.action);
      moves.push(out.action);
      current = await g.step(current, out.action);
      g.cache.set(moves.join(","), current);
      d = await g.describe(current);
    }
    const winner = winnerOf(d);
    return {
      move: aiMoves[0], ai_moves: aiMoves, moves, value: first.value,
      policy: Array.from(first.policy), terminated: d.done,
      winner: !d.done ? null : winner === null ? "draw" : winner === ai ? "ai" : "human",
      simulations: first.simulations, search: first.search,
      ...(first.depth === undefined ? {} : { depth: first.depth }),
    };
  }

  /** One search of `state`: alpha-beta for an alpha-beta model on a time per move (its
   * depth and positions bound it too, as `azjax serve`'s), else the tree search; at a root
   * the endgame table solves, the table's move. */
  async function think(state, simulations, movetime) {
    const tableMove = await g.tableMove(state);
    if (movetime !== undefined && search.alphabeta) {
      const ab = search.alphabeta;
      const out = await runAlphaBeta(g.alphaBetaModel(), state, {
        depth: ab.depth, quiescence: ab.quiescence, nodes: ab.nodes, leafScale: ab.leaf_scale,
        movetime,
      });
      const action = tableMove ?? out.action;
      const policy = new Float32Array(meta.num_actions);
      policy[action] = 1;
      return { action, value: out.value, policy, simulations: out.nodes,
               search: "alphabeta", depth: out.depth };
    }
    const options = {
      algorithm: search.algorithm, numSimulations: simulations, numActions: meta.num_actions,
      maxNumConsideredActions: search.max_num_considered_actions,
      qtransform: search.qtransform, pbCInit: search.pb_c_init, pbCBase: search.pb_c_base,
      greedyAction: search.greedy_action,
    };
    const model = g.searchModel();
    const out = movetime === undefined ? await runSearch(model, state, options)
      : await timedSearch(model, state, options, movetime);
    return { ...out, action: tableMove ?? out.action, search: search.algorithm,
             simulations: out.visitCounts.reduce((a, b) => a + b, 0) };
  }

  // A search on the clock reaches half its positions until WebAssembly's compiler has
  // optimised the runtime's hot code, after a second or two of running: for a model whose
  // first choice is a time per move, short searches of the initial position (answers
  // dropped) do that while the page waits for the human, in slices between which the page
  // draws and answers clicks; the AI's first move stops them.
  let warming = Boolean(search.alphabeta);
  const warmed = (async () => {
    for (let slice = 0; warming && slice < WARM_UP_SLICES; slice += 1) {
      await new Promise((resolve) => { setTimeout(resolve, 0); });
      await think(g.initial, undefined, WARM_UP_SLICE_S);
    }
  })().catch(() => {});

  return {
    games: async () => ({
      simulations: search.strengths, default_simulations: defaultSimulations,
      movetimes: search.movetimes,
      games: { [meta.id]: {
        title: meta.title, players: meta.players, num_actions: meta.num_actions,
        labels: meta.labels, model: meta.model, untrained: meta.untrained,
        default_movetime: search.alphabeta ? Math.max(...search.movetimes) : null,
      } },
    }),
    state,
    move,
    game: g,  // for tests and the curious: the exported functions themselves
    think,  // and one search of a state: (state, simulations, movetime) -> the AI's move
  };
}
