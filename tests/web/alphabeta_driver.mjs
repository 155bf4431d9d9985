// Runs the browser's alpha-beta (azjax/apps/static/alphabeta.js) over the synthetic game of
// tests/test_web_alphabeta.py, for the Python test to compare with plain minimax.
//
// stdin: JSON {numActions, cases: [{root: uint32, player: 0 or 1, options: runAlphaBeta's
//   options, with "clockStepMs": a clock that advances that much each time it is read}]}.
// stdout: JSON [{action, value, nodes, depth, complete, asked: [["position:player:action",
//   ...], ...]}]: what runAlphaBeta returns, and the moves it asked the model to play, call
//   by call, in order.
//
// The game is the test's, written again here with the same uint32 arithmetic: a position is
// a uint32 and the player to move; a move XORs in its action's code, so the same moves in
// another order reach the same position (the table is used). Every value is k / 64.

import { drawLegal, drawLogit, importStatic, mix, rand, readInput } from "./synthetic.mjs";

const { runAlphaBeta } = await importStatic("alphabeta.js");

function position(h, player, numActions) {
  const legal = drawLegal(h, numActions, 6); // 0 to 5 eighths of the actions illegal
  const logits = Float32Array.from(legal, (_, a) => drawLogit(h, a));
  return {
    state: { h, player }, key: `${h}:${player}`, player, legal, logits,
    done: rand(h, 300) % 10 === 0, reward: (rand(h, 301) % 3) - 1,
    forcing: rand(h, 305) % 3 === 0, value: ((rand(h, 200) >>> 25) - 64) / 64 * 1.25,
  };
}

function makeModel(numActions, asked) {
  return {
    async root({ h, player }) {
      return position(h, player, numActions);
    },
    async children({ h, player }, actions) {
      asked.push(actions.map((action) => `${h}:${player}:${action}`));
      return actions.map((action) => {
        const next = (h ^ mix(action + 1)) >>> 0;
        const same = rand(next, 302) % 6 === 0; // the mover moves again
        return position(next, same ? player : 1 - player, numActions);
      });
    },
  };
}

const { numActions, cases } = await readInput();
const results = [];
for (const { root, player, options } of cases) {
  const asked = [];
  const { clockStepMs, ...rest } = options;
  let time = 0;
  const now = () => (time += clockStepMs ?? 0);
  const out = await runAlphaBeta(makeModel(numActions, asked), { h: root, player },
                                 { ...rest, now });
  results.push({ ...out, asked });
}
process.stdout.write(JSON.stringify(results));
