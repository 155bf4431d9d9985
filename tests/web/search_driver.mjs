// Runs the browser search (azjax/apps/static/search.js) over the synthetic model of
// tests/test_web_search.py, for the Python test to compare with azjax's own search.
//
// stdin: JSON {numActions, cases: [{root: uint32 state, options: runSearch's options}]}.
// stdout: JSON [{action, policy: [A], value, visitCounts: [A], puctTies}], one per case.
//
// The model is the test's `_evaluate` / `_recurrent_fn`, written again here with the same
// uint32 arithmetic; every float it returns is k / 2^n, exact in float32.

import { drawLegal, drawLogit, importStatic, mix, rand, readInput } from "./synthetic.mjs";

const { runSearch } = await importStatic("search.js");
const imul = Math.imul;

function evaluate(h, numActions) {
  const legal = drawLegal(h, numActions, 7); // 0 to 6 eighths of the actions illegal
  const logits = Float32Array.from(legal, (ok, a) => (ok ? drawLogit(h, a) : -1e9));
  const value = ((rand(h, 200) >>> 25) - 64) / 64;
  return { logits, legal, value };
}

function makeModel(numActions) {
  return {
    async root(h) {
      return evaluate(h, numActions);
    },
    async recurrent(h, action) {
      const next = mix((h ^ imul(action + 1, 0x9e3779b9)) >>> 0);
      const { logits, value } = evaluate(next, numActions);
      if (rand(next, 300) % 8 === 0) { // the game ends: -1, 0 or +1 for the mover
        return { reward: (rand(next, 301) % 3) - 1, discount: 0, logits, value: 0, state: next };
      }
      const bonus = rand(next, 303) % 16 === 0 ? (rand(next, 304) % 2 === 0 ? 0.25 : -0.25) : 0;
      const discount = rand(next, 302) % 8 === 0 ? 1 : -1; // 1: the mover moves again
      return { reward: bonus, discount, logits, value, state: next };
    },
  };
}

const { numActions, cases } = await readInput();
const model = makeModel(numActions);
const results = [];
for (const { root, options } of cases) {
  const out = await runSearch(model, root, { ...options, numActions });
  results.push({
    action: out.action,
    policy: Array.from(out.policy),
    value: out.value,
    visitCounts: Array.from(out.visitCounts),
    puctTies: out.puctTies,
  });
}
process.stdout.write(JSON.stringify(results));
