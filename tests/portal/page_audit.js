// What the layout tests check on each portal page, run in the page: a list of problems, empty
// when none. Horizontal overflow, one <main>, labelled controls, named buttons, and WCAG AA
// contrast (4.5:1) of every visible text against the first opaque background behind it.
() => {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > window.innerWidth) {
    problems.push(`page is ${root.scrollWidth}px wide in a ${window.innerWidth}px window`);
  }
  if (document.querySelectorAll("main").length !== 1) problems.push("not exactly one <main>");
  const visible = (el) =>
    el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (el.type === "hidden" || !visible(el)) continue;
    const named =
      el.labels.length > 0 || el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
    if (!named) problems.push(`unlabelled control ${el.outerHTML.slice(0, 80)}`);
  }
  for (const el of document.querySelectorAll("button")) {
    if (visible(el) && !el.textContent.trim() && !el.getAttribute("aria-label")) {
      problems.push(`unnamed button ${el.outerHTML.slice(0, 80)}`);
    }
  }
  const rgb = (text) => (text.match(/[\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const lin = (c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  const background = (el) => {
    for (let at = el; at; at = at.parentElement) {
      const colour = rgb(getComputedStyle(at).backgroundColor);
      if (colour.length === 3 || colour[3] === 1) return colour.slice(0, 3);
    }
    return rgb(getComputedStyle(document.documentElement).backgroundColor).slice(0, 3);
  };
  for (const el of document.querySelectorAll("body *")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !visible(el) || el.closest("svg")) continue;
    const [a, b] = [luminance(rgb(getComputedStyle(el).color)), luminance(background(el))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) {
      const text = el.textContent.trim().slice(0, 30);
      problems.push(`contrast ${ratio.toFixed(2)} (AA needs 4.5) on ${el.tagName} "${text}"`);
    }
  }
  return problems;
}
