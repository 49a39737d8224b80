// End-to-end scenario for the document library through the real window:
// add a folder with a two-page PDF as watched with the in-app chooser,
// watch it become indexed, drop a note into the folder and see it picked
// up, search it from the Library view and open the passage, ask Ei a
// question whose answer is on page 2 and see the reply cite that page,
// open the cited passage, then remove the document and find no trace of
// its text in the library's files.
//
// (A native drag-and-drop cannot be synthesised through WebDriver; the drop
// goes to the same engine call, `import_documents`, as the chooser.)

import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { config, log, openTab, runIfMain, selectPersona, sendAndAwaitReply, shot, waitForPersona, withSession } from "./app.e2e.mjs";
import { Keys, waitFor } from "./webdriver.mjs";

const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;
const FACT = "The Quillfeather lighthouse keeper rings the brass bell at seven every evening.";
const WORD = "Quillfeather";
const QUESTION = "At what time does the Quillfeather lighthouse keeper ring the brass bell?";

function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** A PDF with one line of Helvetica text per page and a correct xref table. */
function pdfWith(pages) {
  const n = pages.length;
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    `<< /Type /Pages /Kids [${pages.map((_, i) => `${4 + 2 * i} 0 R`).join(" ")}] /Count ${n} >>`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ];
  pages.forEach((text, i) => {
    objects.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${5 + 2 * i} 0 R >>`);
    const stream = `BT /F1 12 Tf 72 700 Td (${text}) Tj ET`;
    objects.push(`<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`);
  });
  let out = "%PDF-1.4\n";
  const offsets = [];
  objects.forEach((body, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) out += `${String(o).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return out;
}

/** Files under `dir` (recursively) whose bytes contain `word`. */
async function filesContaining(dir, word) {
  const found = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath ?? entry.path, entry.name);
    if ((await readFile(path)).includes(word)) found.push(path);
  }
  return found;
}

async function addWithChooser(ctx, folder) {
  await openTab(ctx, "library");
  await ctx.session.waitForElement(css("library-empty"), 30_000);
  await shot(ctx, "library-empty");
  await (await ctx.session.findElement(css("library-add"))).click();
  const path = await ctx.session.waitForElement(css("chooser-path"));
  await waitFor(async () => (await path.property("value")) !== "", { timeout: 10_000, message: "the chooser to open a folder" });
  await path.clear();
  await path.sendKeys(folder + Keys.ENTER);
  const names = async () => Promise.all((await ctx.session.findElements(css("chooser-entry"))).map((e) => e.attribute("data-name")));
  await waitFor(async () => (await names()).join() === "lighthouse.pdf", { timeout: 10_000, message: "the folder's PDF to be listed" });
  await shot(ctx, "chooser");
  // The whole folder, watched: files added to it later are picked up.
  await (await ctx.session.findElement(css("chooser-folder-watch"))).click();
}

export async function main() {
  const cfg = config();
  const home = process.env.LEDGERMIND_HOME;
  check(home, "LEDGERMIND_HOME is not set (scripts/e2e.sh sets it)");
  const started = Date.now();
  const folder = await mkdtemp(join(tmpdir(), "lm-e2e-docs-"));
  await writeFile(join(folder, "lighthouse.pdf"), pdfWith(["Harbour notes. The pier is painted green.", FACT]), "latin1");
  await withSession(cfg, "library", async (ctx) => {
    await waitForPersona(ctx, "Ei");
    log(`adding ${folder}/lighthouse.pdf`);
    await addWithChooser(ctx, folder);
    const row = await ctx.session.waitForElement(css("library-document", '[data-name="lighthouse.pdf"]'), 120_000);
    await waitFor(async () => (await row.attribute("data-status")) === "indexed", { timeout: 120_000, message: "the PDF to be indexed" });
    log(`  listed: ${(await row.text()).replace(/\s+/g, " ")}`);
    await shot(ctx, "library-indexed");

    log("adding a note to the watched folder");
    await writeFile(join(folder, "harbour.md"), "# Harbour\n\nThe ferry to the island leaves from pier four.\n");
    const note = await ctx.session.waitForElement(css("library-document", '[data-name="harbour.md"]'), 60_000);
    await waitFor(async () => (await note.attribute("data-status")) === "indexed", { timeout: 60_000, message: "the new note to be indexed" });
    await shot(ctx, "library-watched");

    log("searching the library");
    const search = await ctx.session.findElement(css("library-search"));
    await search.sendKeys("brass bell" + Keys.ENTER);
    const hit = await ctx.session.waitForElement(css("library-hit"), 30_000);
    const place = await hit.text();
    check(place.includes("lighthouse.pdf, p. 2"), `the search's first result is cited as ${place}`);
    await hit.click();
    const text = await ctx.session.waitForElement(css("passage-text"));
    check((await text.text()).includes("brass bell"), "the opened passage does not hold the answer");
    await shot(ctx, "library-passage");
    await (await ctx.session.findElement(css("passage-close"))).click();
    await waitFor(async () => (await ctx.session.findElements(css("passage-dialog"))).length === 0, { message: "the passage to close" });

    log("asking Ei");
    await openTab(ctx, "chat");
    await selectPersona(ctx, "Ei");
    const { reply } = await sendAndAwaitReply(ctx, QUESTION);
    const cited = await waitFor(
      async () => {
        const all = await ctx.session.findElements(css("citation"));
        return all.length > 0 ? all : null;
      },
      { timeout: 15_000, message: "citations under the reply" },
    );
    const labels = await Promise.all(cited.map((c) => c.text()));
    log(`  reply ${JSON.stringify(reply.slice(0, 200))}; cited ${labels.join(" | ")}`);
    check(labels[0].includes("lighthouse.pdf, p. 2"), `the reply's first citation is ${labels[0]}`);
    await shot(ctx, "reply-cited");
    await cited[0].click();
    const passage = await ctx.session.waitForElement(css("passage-text"));
    check((await passage.text()).includes("seven every evening"), "the cited passage does not hold the answer");
    await shot(ctx, "citation-opened");
    await (await ctx.session.findElement(css("passage-close"))).click();
    await waitFor(async () => (await ctx.session.findElements(css("passage-dialog"))).length === 0, { message: "the passage to close" });

    log("removing the document");
    await openTab(ctx, "library");
    const pdfRow = await ctx.session.waitForElement(css("library-document", '[data-name="lighthouse.pdf"]'));
    await (await ctx.session.findElement(css("library-remove"), pdfRow)).click();
    await waitFor(async () => (await ctx.session.findElements(css("library-document", '[data-name="lighthouse.pdf"]'))).length === 0, {
      timeout: 30_000,
      message: "the PDF to leave the list",
    });
    check((await ctx.session.findElements(css("library-document", '[data-name="harbour.md"]'))).length === 1, "the note was removed too");
    await shot(ctx, "library-removed");
    const inLibrary = await filesContaining(join(home, "library"), WORD);
    check(inLibrary.length === 0, `the removed document's text is still in ${inLibrary.join(", ")}`);
    const elsewhere = (await filesContaining(home, WORD)).filter((p) => !p.startsWith(join(home, "models")));
    // The question itself names the word, so the conversation holds it; the
    // passage's own sentence must be gone from everything but what the
    // person or the persona said.
    const sentence = (await filesContaining(home, "seven every evening")).filter((p) => !p.startsWith(join(home, "models")));
    log(`  "${WORD}" (in the question) remains in: ${elsewhere.map((p) => p.slice(home.length)).join(", ") || "nothing"}`);
    log(`  the passage's sentence remains in: ${sentence.map((p) => p.slice(home.length)).join(", ") || "nothing"}`);
    // What the persona said aloud is the person's conversation, not the
    // library's copy: a reply that quoted the passage keeps it.
    const echoed = reply.includes("seven every evening");
    check(sentence.length === 0 || echoed, `the removed passage's sentence is still in ${sentence.join(", ")} though no message says it`);
  });
  log(`PASSED in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
