// azjax's greedy tree search in the browser: a port of `azjax.core.search.make_search(...)`
// with noise=False, for one game, over a model the page evaluates itself (no server).
//
// It follows azjax's loop (azjax/core/tree_search.py `run_search`) and mctx 0.0.71's public
// rules it calls (azjax/core/policies.py): Gumbel MuZero with gumbel_scale 0 (sequential
// halving at the root, the deterministic improved-policy rule below it) and PUCT without
// Dirichlet noise (`muzero_action_selection`), with the qtransforms `completed_by_mix_value`,
// `by_parent_and_siblings` and `by_min_max` on [-1, 1]. Values are stored in Float32Arrays
// and every arithmetic result is rounded with Math.fround, so the numbers are JAX's float32
// ones; exp and log may still differ from XLA's by an ulp (JS computes them in double), and
// tests/test_web_search.py checks the port against the Python search.
//
// The one intended difference: mctx adds 1e-7 x uniform noise to PUCT's scores to break ties
// at random; here a tie goes to the lowest action index (`puctTies` counts the selections a
// near-tie decided, where the Python search may have gone another way).

/**
 * Runs one search from `rootState` and returns the greedy move with the search's statistics.
 *
 * The tree has `numSimulations + 1` nodes: the root, then one per simulation, which walks
 * from the root to an edge not yet expanded (or below a terminal, discount-0 edge, or at
 * depth `numSimulations`, where the node there is expanded again), evaluates it with one
 * `model.recurrent` call and backs `reward + discount * value` up to the root, each node's
 * value the running mean of what reached it (the network's value at expansion included).
 * Rewards and values are for the player to move at the node; the discount is -1 when the
 * player to move changes, +1 when it stays, 0 after the game's end (then the value is 0).
 *
 * @param {object} model the position evaluator; states are opaque to the search.
 * @param {function(*): Promise<{logits: Float32Array, value: number,
 *     legal: (Uint8Array|boolean[])}>} model.root the root's prior logits [A] (illegal
 *     actions -1e9; the search masks them again with `legal`), value and legal actions.
 * @param {function(*, number): Promise<{reward: number, discount: number,
 *     logits: Float32Array, value: number, state: *}>} model.recurrent the move `action`
 *     from `state`: its reward and discount, and the next state's logits [A] (illegal actions
 *     already -1e9), value and state.
 * @param {*} rootState the position to search, handed to `model.root` and `model.recurrent`.
 * @param {object} [options] the search's settings, azjax's `SearchConfig` names in camelCase
 *     (its defaults):
 * @param {("gumbel"|"puct")} [options.algorithm="gumbel"]
 * @param {number} [options.numSimulations=16] simulations, >= 0.
 * @param {number} [options.maxNumConsideredActions=16] gumbel: sequential halving's candidates.
 * @param {("completed_by_mix_value"|"by_parent_and_siblings"|"min_max"|"by_min_max")}
 *     [options.qtransform="completed_by_mix_value"]
 * @param {number} [options.pbCInit=1.25] puct: c_init.
 * @param {number} [options.pbCBase=19652] puct: c_base.
 * @param {("policy"|"halving")} [options.greedyAction="policy"] gumbel: the move is the
 *     argmax of the final policy, or sequential halving's survivor (puct: the most visited).
 * @param {number} [options.numActions] A (default: the root logits' length).
 * @returns {Promise<{action: number, policy: Float32Array, value: number,
 *     visitCounts: Int32Array, puctTies: number}>} the move; the policy [A] (gumbel:
 *     softmax(logits + completed Q) over the legal moves, puct: the root's visit shares); the
 *     root's search value (mctx's `summary().value`); the root's visits [A]; and, for puct,
 *     how many selections a near-tie decided (a diagnostic, 0 for gumbel).
 */
export async function runSearch(model, rootState, options = {}) {
  const opts = {
    algorithm: "gumbel", numSimulations: 16, maxNumConsideredActions: 16,
    qtransform: "completed_by_mix_value", pbCInit: 1.25, pbCBase: 19652.0,
    greedyAction: "policy", ...options,
  };
  if (opts.algorithm !== "gumbel" && opts.algorithm !== "puct") {
    throw new Error(`unknown algorithm ${opts.algorithm}`);
  }
  const numSimulations = opts.numSimulations;
  if (!Number.isInteger(numSimulations) || numSimulations < 0) {
    throw new Error(`numSimulations must be an integer >= 0, not ${numSimulations}`);
  }
  if (opts.greedyAction !== "policy" && opts.greedyAction !== "halving") {
    throw new Error(`unknown greedyAction ${opts.greedyAction}`);
  }
  const qtransform = qtransformFromName(opts.qtransform);

  const root = await model.root(rootState);
  const numActions = opts.numActions ?? root.logits.length;
  const invalid = new Uint8Array(numActions);
  const masked = new Float32Array(numActions);
  for (let a = 0; a < numActions; a++) {
    invalid[a] = root.legal[a] ? 0 : 1;
    masked[a] = invalid[a] ? ILLEGAL_LOGIT : root.logits[a];
  }
  // The root's prior as policies.py's gumbel_root / puct_root leave it (puct: the log of the
  // softmax, as mixing in a zero share of Dirichlet noise does).
  const rootLogits = opts.algorithm === "gumbel"
    ? withoutInvalidMass(masked, invalid)
    : withoutInvalidMass(logProbs(softmax(masked)), invalid);

  const tree = new Tree(numSimulations + 1, numActions, invalid);
  tree.setNode(ROOT, rootLogits, root.value, rootState);

  const search = opts.algorithm === "gumbel"
    ? gumbelRules(tree, qtransform, numSimulations, opts.maxNumConsideredActions)
    : puctRules(tree, qtransform, opts.pbCInit, opts.pbCBase);

  // azjax's walk depth limit is the number of simulations.
  const maxDepth = numSimulations;
  for (let sim = 0; sim < numSimulations; sim++) {
    let parent = ROOT;
    let action = search.rootSelection();
    let depth = 1;
    while (tree.continues(parent, action, depth, maxDepth)) {
      parent = tree.child(parent, action);
      action = search.interiorSelection(parent);
      depth += 1;
    }
    // The node a simulation first expands gets index sim + 1; an existing one (below a
    // terminal edge or at maxDepth) is evaluated again in place.
    let node = tree.child(parent, action);
    if (node === UNVISITED) node = sim + 1;
    const out = await model.recurrent(tree.embeddings[parent], action);
    tree.expand(parent, action, node, out);
    tree.backup(node);
  }
  return search.result(opts.greedyAction);
}

const UNVISITED = -1;
const ROOT = 0;
const ILLEGAL_LOGIT = -1e9; // azjax.core.search's mask for illegal actions
const F32_LOWEST = -3.4028234663852886e38; // jnp.finfo(float32).min
const F32_TINY = 1.1754943508222875e-38; // jnp.finfo(float32).tiny
const f32 = Math.fround;

/** mctx's Tree for one game: node arrays [N], edge arrays [N * A] row-major. */
class Tree {
  constructor(numNodes, numActions, rootInvalid) {
    const edges = numNodes * numActions;
    this.numActions = numActions;
    this.rootInvalid = rootInvalid;
    this.nodeVisits = new Int32Array(numNodes);
    this.rawValues = new Float32Array(numNodes);
    this.nodeValues = new Float32Array(numNodes);
    this.parents = new Int32Array(numNodes).fill(-1);
    this.actionFromParent = new Int32Array(numNodes).fill(-1);
    this.childrenIndex = new Int32Array(edges).fill(UNVISITED);
    this.childrenPriorLogits = new Float32Array(edges);
    this.childrenValues = new Float32Array(edges);
    this.childrenVisits = new Int32Array(edges);
    this.childrenRewards = new Float32Array(edges);
    this.childrenDiscounts = new Float32Array(edges);
    this.embeddings = new Array(numNodes).fill(null);
  }

  row(array, node) {
    return array.subarray(node * this.numActions, (node + 1) * this.numActions);
  }

  child(node, action) {
    return this.childrenIndex[node * this.numActions + action];
  }

  /** Whether a walk that chose `action` at `node` goes on below it (tree_search._step). */
  continues(node, action, depth, maxDepth) {
    const edge = node * this.numActions + action;
    // Below a discount-0 edge nothing reaches the values above: the walk stops there.
    return this.childrenIndex[edge] !== UNVISITED && this.childrenDiscounts[edge] !== 0
      && depth < maxDepth;
  }

  /** tree_search._set_nodes: a node's prior, raw and search value, one more visit. */
  setNode(node, logits, value, embedding) {
    const prior = this.row(this.childrenPriorLogits, node);
    for (let a = 0; a < this.numActions; a++) prior[a] = logits[a];
    this.rawValues[node] = value;
    this.nodeValues[node] = value; // a re-expanded node restarts from the network's value
    this.nodeVisits[node] += 1;
    this.embeddings[node] = embedding;
  }

  /** tree_search.expand: writes the evaluated edge's node and links it under its parent. */
  expand(parent, action, node, out) {
    this.setNode(node, out.logits, out.value, out.state);
    const edge = parent * this.numActions + action;
    this.childrenIndex[edge] = node;
    this.childrenRewards[edge] = out.reward;
    this.childrenDiscounts[edge] = out.discount;
    this.parents[node] = parent;
    this.actionFromParent[node] = action;
  }

  /** tree_search.backup: the leaf's value up its path, each parent's a running mean. */
  backup(leaf) {
    let value = this.nodeValues[leaf];
    let index = leaf;
    while (index !== ROOT) {
      const parent = this.parents[index];
      const edge = parent * this.numActions + this.actionFromParent[index];
      const count = this.nodeVisits[parent];
      value = f32(this.childrenRewards[edge] + f32(this.childrenDiscounts[edge] * value));
      const mean = f32(f32(f32(this.nodeValues[parent] * count) + value) / (count + 1));
      this.nodeValues[parent] = mean;
      this.nodeVisits[parent] = count + 1;
      this.childrenValues[edge] = this.nodeValues[index];
      this.childrenVisits[edge] += 1;
      index = parent;
    }
  }

  /** mctx's Tree.qvalues: reward + discount x child value per action (unvisited: 0). */
  qvalues(node) {
    const q = new Float32Array(this.numActions);
    const base = node * this.numActions;
    for (let a = 0; a < this.numActions; a++) {
      q[a] = f32(this.childrenRewards[base + a]
        + f32(this.childrenDiscounts[base + a] * this.childrenValues[base + a]));
    }
    return q;
  }
}

// ---- qtransforms: (tree, node) -> Float32Array [A], as mctx's ----

function qtransformFromName(name) {
  if (name === "completed_by_mix_value") return completedByMixValue;
  if (name === "by_parent_and_siblings") return byParentAndSiblings;
  if (name === "min_max" || name === "by_min_max") return byMinMax;
  throw new Error(`unknown qtransform ${name}`);
}

/** mctx.qtransform_by_min_max with the game's range [-1, 1]; unvisited actions score 0. */
function byMinMax(tree, node) {
  const q = tree.qvalues(node);
  const visits = tree.row(tree.childrenVisits, node);
  for (let a = 0; a < q.length; a++) {
    q[a] = f32(f32((visits[a] > 0 ? q[a] : -1) + 1) / 2);
  }
  return q;
}

/** mctx.qtransform_by_parent_and_siblings: Q normalised by the min and max over the node's
 * value and its visited children's Q; unvisited actions score 0. */
function byParentAndSiblings(tree, node) {
  const q = tree.qvalues(node);
  const visits = tree.row(tree.childrenVisits, node);
  const nodeValue = tree.nodeValues[node];
  let lo = nodeValue;
  let hi = nodeValue;
  for (let a = 0; a < q.length; a++) {
    const safe = visits[a] > 0 ? q[a] : nodeValue;
    lo = Math.min(lo, safe);
    hi = Math.max(hi, safe);
  }
  const range = Math.max(f32(hi - lo), EPSILON);
  for (let a = 0; a < q.length; a++) {
    q[a] = f32(f32((visits[a] > 0 ? q[a] : lo) - lo) / range);
  }
  return q;
}

const EPSILON = f32(1e-8);
const VALUE_SCALE = f32(0.1);
const MAXVISIT_INIT = 50;

/** mctx.qtransform_completed_by_mix_value (its defaults): unvisited actions get the mixed
 * value, all are rescaled to [0, 1] and scaled by (50 + max visits) x 0.1. */
function completedByMixValue(tree, node) {
  const q = tree.qvalues(node);
  const visits = tree.row(tree.childrenVisits, node);
  const probs = softmax(tree.row(tree.childrenPriorLogits, node));
  let sumVisits = 0;
  let maxVisits = 0;
  let sumProbs = 0;
  for (let a = 0; a < q.length; a++) {
    sumVisits += visits[a];
    maxVisits = Math.max(maxVisits, visits[a]);
    // The floor keeps the weighted Q finite when visited actions have zero prior.
    probs[a] = Math.max(F32_TINY, probs[a]);
    if (visits[a] > 0) sumProbs = f32(sumProbs + probs[a]);
  }
  let weightedQ = 0;
  for (let a = 0; a < q.length; a++) {
    if (visits[a] > 0) weightedQ = f32(weightedQ + f32(f32(probs[a] * q[a]) / sumProbs));
  }
  const mixed = f32(f32(tree.rawValues[node] + f32(sumVisits * weightedQ)) / (sumVisits + 1));
  let lo = Infinity;
  let hi = -Infinity;
  for (let a = 0; a < q.length; a++) {
    if (visits[a] === 0) q[a] = mixed;
    lo = Math.min(lo, q[a]);
    hi = Math.max(hi, q[a]);
  }
  const range = Math.max(f32(hi - lo), EPSILON);
  const scale = f32(f32(MAXVISIT_INIT + maxVisits) * VALUE_SCALE);
  for (let a = 0; a < q.length; a++) q[a] = f32(scale * f32(f32(q[a] - lo) / range));
  return q;
}

// ---- Gumbel MuZero (gumbel_scale 0) ----

function gumbelRules(tree, qtransform, numSimulations, maxNumConsideredActions) {
  let numValid = 0;
  for (const bad of tree.rootInvalid) numValid += bad ? 0 : 1;
  // mctx indexes its table of schedules by the candidates actually available.
  const schedule = consideredVisits(Math.min(maxNumConsideredActions, numValid), numSimulations);
  const rootLogits = () => tree.row(tree.childrenPriorLogits, ROOT);
  const rootVisits = () => tree.row(tree.childrenVisits, ROOT);

  return {
    // mctx.gumbel_muzero_root_action_selection: the best-scored action among those visited
    // as often as the schedule says for this simulation (sum of the root's visits).
    rootSelection() {
      const visits = rootVisits();
      let simulation = 0;
      for (const v of visits) simulation += v;
      const score = consideredScore(schedule[simulation], rootLogits(), qtransform(tree, ROOT),
        visits);
      return argmax(score, tree.rootInvalid);
    },
    // mctx.gumbel_muzero_interior_action_selection: visits towards softmax(logits + Q).
    interiorSelection(node) {
      const logits = tree.row(tree.childrenPriorLogits, node);
      const q = qtransform(tree, node);
      for (let a = 0; a < q.length; a++) q[a] = f32(logits[a] + q[a]);
      const probs = softmax(q);
      const visits = tree.row(tree.childrenVisits, node);
      let total = 0;
      for (const v of visits) total += v;
      for (let a = 0; a < q.length; a++) probs[a] = f32(probs[a] - f32(visits[a] / (1 + total)));
      return argmax(probs, null);
    },
    // policies.gumbel_result and make_search's choice between its two greedy actions.
    result(greedyAction) {
      const visits = rootVisits();
      const logits = rootLogits();
      const q = qtransform(tree, ROOT);
      let mostVisits = 0;
      for (const v of visits) mostVisits = Math.max(mostVisits, v);
      const survivor = argmax(consideredScore(mostVisits, logits, q, visits), tree.rootInvalid);
      const improved = new Float32Array(q.length);
      for (let a = 0; a < q.length; a++) improved[a] = f32(logits[a] + q[a]);
      const policy = softmax(withoutInvalidMass(improved, tree.rootInvalid));
      const action = greedyAction === "halving" ? survivor : argmax(policy, null);
      return summary(tree, action, policy, 0);
    },
  };
}

/** Sequential halving's score (mctx seq_halving.score_considered, with gumbel 0): logits +
 * completed Q for the actions visited `consideredVisit` times, -inf for the others. */
function consideredScore(consideredVisit, logits, qvalues, visits) {
  let top = -Infinity;
  for (const l of logits) top = Math.max(top, l);
  const score = new Float32Array(logits.length);
  for (let a = 0; a < logits.length; a++) {
    // The floor lets a lone survivor with a very low logit still score finitely.
    const value = Math.max(ILLEGAL_LOGIT, f32(f32(logits[a] - top) + qvalues[a]));
    score[a] = visits[a] === consideredVisit ? value : -Infinity;
  }
  return score;
}

/** mctx seq_halving.get_sequence_of_considered_visits: for each simulation, the visit count
 * the root's candidates must have to be chosen, halving the candidates each round. */
function consideredVisits(maxConsidered, numSimulations) {
  const sequence = [];
  if (maxConsidered <= 1) {
    for (let i = 0; i < numSimulations; i++) sequence.push(i);
    return sequence;
  }
  let log2max = 0; // ceil(log2(maxConsidered)), in integers
  while ((1 << log2max) < maxConsidered) log2max += 1;
  const visits = new Array(maxConsidered).fill(0);
  let considered = maxConsidered;
  while (sequence.length < numSimulations) {
    const extra = Math.max(1, Math.floor(numSimulations / (log2max * considered)));
    for (let k = 0; k < extra; k++) {
      for (let i = 0; i < considered; i++) sequence.push(visits[i]);
      for (let i = 0; i < considered; i++) visits[i] += 1;
    }
    considered = Math.max(2, Math.floor(considered / 2));
  }
  return sequence.slice(0, numSimulations);
}

// ---- PUCT (no Dirichlet noise) ----

function puctRules(tree, qtransform, pbCInit, pbCBase) {
  const cInit = f32(pbCInit);
  const cBase = f32(pbCBase);
  let ties = 0;

  // mctx.muzero_action_selection; at the root, illegal actions are masked.
  function select(node, invalid) {
    const visitsHere = tree.nodeVisits[node];
    const pbC = f32(cInit + f32(Math.log(f32(f32(f32(visitsHere + cBase) + 1) / cBase))));
    const probs = softmax(tree.row(tree.childrenPriorLogits, node));
    const visits = tree.row(tree.childrenVisits, node);
    const score = qtransform(tree, node);
    const explore = f32(f32(Math.sqrt(visitsHere)) * pbC);
    for (let a = 0; a < score.length; a++) {
      score[a] = f32(score[a] + f32(f32(explore * probs[a]) / (visits[a] + 1)));
    }
    // mctx breaks ties with 1e-7 x uniform noise; here the lowest action index wins. Count
    // the selections whose runner-up is close enough for that noise to have mattered.
    const best = argmax(score, invalid);
    const margin = 1e-6 * Math.max(1, Math.abs(score[best]));
    for (let a = 0; a < score.length; a++) {
      if (a !== best && !(invalid && invalid[a]) && score[best] - score[a] <= margin) {
        ties += 1;
        break;
      }
    }
    return best;
  }

  return {
    rootSelection: () => select(ROOT, tree.rootInvalid),
    interiorSelection: (node) => select(node, null),
    // policies.puct_result's weights, and make_search's greedy move: their argmax.
    result() {
      const visits = tree.row(tree.childrenVisits, ROOT);
      let total = 0;
      for (const v of visits) total += v;
      const policy = new Float32Array(visits.length);
      for (let a = 0; a < visits.length; a++) {
        policy[a] = total > 0 ? f32(visits[a] / total) : f32(1 / visits.length);
      }
      return summary(tree, argmax(policy, null), policy, ties);
    },
  };
}

// ---- shared helpers ----

function summary(tree, action, policy, puctTies) {
  return {
    action,
    policy,
    value: tree.nodeValues[ROOT],
    visitCounts: Int32Array.from(tree.row(tree.childrenVisits, ROOT)),
    puctTies,
  };
}

/** jnp.argmax over the actions not `invalid` (masked to -inf): the first of equal maxima,
 * and action 0 when every entry of the masked row is -inf. */
function argmax(scores, invalid) {
  let best = 0;
  let top = -Infinity;
  for (let a = 0; a < scores.length; a++) {
    if (invalid && invalid[a]) continue;
    if (scores[a] > top) {
      top = scores[a];
      best = a;
    }
  }
  return best;
}

/** jax.nn.softmax in float32. */
function softmax(x) {
  let top = -Infinity;
  for (const v of x) top = Math.max(top, v);
  const out = new Float32Array(x.length);
  let total = 0;
  for (let a = 0; a < x.length; a++) {
    out[a] = Math.exp(f32(x[a] - top));
    total = f32(total + out[a]);
  }
  for (let a = 0; a < x.length; a++) out[a] = f32(out[a] / total);
  return out;
}

/** policies._log_probs: log with zeros floored at the smallest normal float32. */
function logProbs(probs) {
  return probs.map((p) => Math.log(Math.max(p, F32_TINY)));
}

/** policies.without_invalid_mass: shifted to a maximum of 0, invalid actions at the lowest
 * finite float32 (a softmax over them stays NaN-free). */
function withoutInvalidMass(logits, invalid) {
  let top = -Infinity;
  for (const l of logits) top = Math.max(top, l);
  const out = new Float32Array(logits.length);
  for (let a = 0; a < logits.length; a++) out[a] = invalid[a] ? F32_LOWEST : logits[a] - top;
  return out;
}
