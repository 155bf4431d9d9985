// azjax's alpha-beta over a network in the browser: the search of `search.algorithm:
// alphabeta` (azjax/core/alphabeta.py with azjax/core/search_alphabeta.py's leaves), for one
// game, over a model the page evaluates itself (no server).
//
// Negamax with alpha-beta pruning and iterative deepening to `depth` *whole moves*: a move
// that leaves the same player to move (a draughts multi-jump, played hop by hop) costs no
// depth. Past the depth it searches on while the position is forcing (a capture pending), up
// to `quiescence` more moves, and no path is longer than azjax's stack (4 x (depth +
// quiescence) + 4 actions). A position stepped into is scored by the network: a leaf takes
// a share of its value (clipped to [-1, 1]), a finished game its result (+-1 or 0), so a
// result always outranks the network's opinion; an inner position's policy logits order its
// moves after the transposition table's move and two killers per ply. The table holds a
// value per position and depth (an exact value or a bound) and the best move of the
// position's latest search, of any depth, which is tried first, as azjax's does. So neither
// the pruning nor the table nor the order changes what is found: the root's value is plain
// minimax's over the same leaves (tests/test_web_alphabeta.py checks it against a reference
// minimax), unless the stack's limit cuts a line (a value is kept by position and depth, not
// by the path to it, in azjax too; a draughts line reaches it only where its whole moves
// average more than four hops).
// Among equal moves the first found is played, where azjax draws one at random.
//
// Each step of the deepening is searched to its end unless the positions or the clock run
// out; then the deepest finished step's move is played, as azjax's AlphaBetaPlayer does. A
// position counts each time the search steps into it, as azjax counts them, but the model is
// asked about each move of each position once per search (a step walks the last one's again):
// the first move of a position alone, and where that does not cut the search off, all the
// moves after it together (a runtime call costs about the same for one as for eight).

const INF = 2.0; // beyond every value
const EXACT = 0;
const LOWER = 1;
const UPPER = 2;

/** Stops a deepening step when the positions or the clock run out. */
class OutOfBudget extends Error {}

/**
 * Searches `rootState` and returns the move of the deepest whole-move step it finished.
 *
 * @param {object} model the position evaluator; states are opaque to the search.
 * @param {function(*): Promise<{key: string, player: number, done: boolean,
 *     legal: (Uint8Array|boolean[]), logits: Float32Array}>} model.root the root: a string
 *     naming it exactly (the table's key), its player to move, whether the game is over, its
 *     legal actions [A] and policy logits [A] (which order its moves).
 * @param {function(*, number[]): Promise<Array<{state: *, key: string, player: number,
 *     done: boolean, reward: number, forcing: boolean, legal: (Uint8Array|boolean[]),
 *     value: number, logits: Float32Array}>>} model.children the positions after each of
 *     `actions`, in order: each one's state, a string naming it exactly (the table's key),
 *     its player to move, whether the game is over and the result for that player, whether
 *     it is forcing (searched on past the depth), its legal actions, and the network's value
 *     and logits there. A position's first move is asked alone (it may cut the rest off),
 *     the moves after it together, so a model may answer them in one batch.
 * @param {*} rootState the position to search.
 * @param {object} options
 * @param {number} options.depth D >= 1, whole moves.
 * @param {number} [options.quiescence=8] moves past the depth searched while forcing
 *     (azjax's AlphaBetaConfig default).
 * @param {number} [options.nodes=0] the positions the whole search may step into (0: no
 *     bound), azjax's `search.alphabeta_nodes`.
 * @param {number} [options.leafScale=0.5] the leaves' share of the network's value
 *     (azjax.core.search_alphabeta.LEAF_SCALE; the export writes it to game.json).
 * @param {number} [options.movetime] seconds the search may think (none: no clock).
 * @param {function(): number} [options.now=performance.now] the clock, in milliseconds.
 * @returns {Promise<{action: number, value: number, nodes: number, depth: number,
 *     complete: boolean}>} the move (the first legal action if no step finished, 0 if the
 *     game is over), its value for the player to move, the positions stepped into, the
 *     deepest step finished, and whether that is `depth`.
 */
export async function runAlphaBeta(model, rootState, options) {
  const opts = { quiescence: 8, nodes: 0, leafScale: 0.5, movetime: undefined,
                 now: () => performance.now(), ...options };
  if (!Number.isInteger(opts.depth) || opts.depth < 1) {
    throw new Error(`depth must be an integer >= 1, not ${opts.depth}`);
  }
  if (!Number.isInteger(opts.quiescence) || opts.quiescence < 0) {
    throw new Error(`quiescence must be an integer >= 0, not ${opts.quiescence}`);
  }
  if (!Number.isInteger(opts.nodes) || opts.nodes < 0) {
    throw new Error(`nodes must be an integer >= 0 (0: no bound), not ${opts.nodes}`);
  }
  const root = await model.root(rootState);
  const legalActions = [...root.legal.keys()].filter((a) => root.legal[a]);
  const result = { action: 0, value: 0, nodes: 0, depth: 0, complete: false };
  if (root.done || !legalActions.length) return { ...result, complete: true };
  result.action = legalActions[0];

  const search = new Search(model, opts);
  const started = opts.now();
  search.deadline = opts.movetime === undefined ? Infinity : started + 1000 * opts.movetime;
  const rootNode = { state: rootState, key: root.key, player: root.player, legal: root.legal,
                     logits: root.logits };
  for (let depth = 1; depth <= opts.depth; depth++) {
    try {
      const value = await search.node(rootNode, depth, -INF, INF, 0, result.action);
      // azjax's walk needs a position to spare to climb back to the root: a step that used
      // the whole budget is not finished there either.
      if (opts.nodes && search.nodes >= opts.nodes) break;
      Object.assign(result, { action: search.rootBest, value, depth });
    } catch (error) {
      if (!(error instanceof OutOfBudget)) throw error;
      break;
    }
  }
  return { ...result, nodes: search.nodes, complete: result.depth === opts.depth };
}

/** One search's state: its table, killers, positions and clock. */
class Search {
  constructor(model, opts) {
    this.model = model;
    this.opts = opts;
    this.levels = 4 * (opts.depth + opts.quiescence) + 4; // azjax's stack, in actions
    this.table = new Map(); // key -> Map(depth -> {value, flag})
    this.tableMoves = new Map(); // key -> the best move of its latest search, any depth
    this.children = new Map(); // "key|action" -> the model's child: each deepening step
    // walks again what the last one walked, and the model is a pure function of the two
    this.killers = Array.from({ length: this.levels }, () => [-1, -1]);
    this.nodes = 0;
    this.deadline = Infinity;
    this.rootBest = -1;
  }

  /** The moves of `node` in search order: `first` (the table's move), the killers of its
   * ply, then by the policy's logits (ties to the lower action). */
  order(node, ply, first) {
    const killers = this.killers[ply];
    const rank = (a) => (a === first ? 3 : a === killers[0] ? 2 : a === killers[1] ? 1 : 0);
    const moves = [...node.legal.keys()].filter((a) => node.legal[a]);
    return moves.sort((a, b) => rank(b) - rank(a) || node.logits[b] - node.logits[a] || a - b);
  }

  /** The model's position after `moves[i]` of `node`: asked alone for the first move, else
   * together with every later move not asked yet. */
  async child(node, moves, i) {
    const edge = (action) => `${node.key}|${action}`;
    if (!this.children.has(edge(moves[i]))) {
      const asked = i === 0 ? [moves[0]]
        : moves.slice(i).filter((action) => !this.children.has(edge(action)));
      const found = await this.model.children(node.state, asked);
      asked.forEach((action, j) => this.children.set(edge(action), found[j]));
    }
    return this.children.get(edge(moves[i]));
  }

  /** The value of `node` (for its player to move) searched to `depth` whole moves in the
   * window (alpha, beta): exact inside it, a bound outside (fail-soft). */
  async node(node, depth, alpha, beta, ply, first) {
    const alpha0 = alpha;
    let best = -INF;
    let bestMove = -1;
    const moves = this.order(node, ply, first);
    for (const [i, action] of moves.entries()) {
      const { nodes, now } = this.opts;
      if ((nodes && this.nodes >= nodes) || now() >= this.deadline) throw new OutOfBudget();
      this.nodes += 1;
      const child = await this.child(node, moves, i);
      const same = child.player === node.player;
      const childDepth = depth - (same ? 0 : 1);
      const [lo, hi] = same ? [alpha, beta] : [-beta, -alpha];
      const atLeaf = child.done || (childDepth <= 0 && !child.forcing)
        || childDepth <= -this.opts.quiescence || ply + 2 > this.levels;
      let value;
      if (atLeaf) {
        const scale = this.opts.leafScale;
        value = child.done ? child.reward : scale * Math.min(1, Math.max(-1, child.value));
      } else {
        const entry = this.table.get(child.key)?.get(childDepth);
        value = entry && settles(entry, lo, hi) ? entry.value : await this.node(
          child, childDepth, lo, hi, ply + 1, this.tableMoves.get(child.key) ?? -1);
      }
      if (!same) value = -value;
      if (value > best) [best, bestMove] = [value, action];
      alpha = Math.max(alpha, value);
      if (alpha >= beta) {
        const killers = this.killers[ply];
        if (action !== killers[0]) this.killers[ply] = [action, killers[0]];
        break;
      }
    }
    if (ply === 0) this.rootBest = bestMove;
    const flag = best <= alpha0 ? UPPER : best >= beta ? LOWER : EXACT;
    if (!this.table.has(node.key)) this.table.set(node.key, new Map());
    this.table.get(node.key).set(depth, { value: best, flag });
    this.tableMoves.set(node.key, bestMove);
    return best;
  }
}

/** Whether a table entry of the same depth gives the value in the window (lo, hi). */
function settles(entry, lo, hi) {
  return entry.flag === EXACT || (entry.flag === LOWER && entry.value >= hi)
    || (entry.flag === UPPER && entry.value <= lo);
}
