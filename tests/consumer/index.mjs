// What a user of the npm package writes: import it by name.
import { version, traceMlp, defaultModel } from "ipu-playground";

export { version, traceMlp, defaultModel };

// `node index.mjs 4,8,2 3` prints a traced MLP, as a user's script would.
if (import.meta.url === `file://${process.argv[1]}`) {
  const sizes = (process.argv[2] ?? "4,8,2").split(",").map(Number);
  const batch = Number(process.argv[3] ?? 3);
  const model = traceMlp(sizes, batch);
  console.log(`ipu-playground ${version()}`);
  console.log(model.text);
  console.log(`${model.graph.nodes.length} nodes`);
}
