// Runs in a JupyterLab page (window.jupyterapp, from --LabApp.expose_app_in_browser):
// renders output data with JupyterLab's own IRenderMimeRegistry (marked via
// @jupyterlab/markedparser-extension, removeMath/replaceMath, renderHTML with or
// without the sanitizer, MathJax from @jupyterlab/mathjax-extension) and reports
// what in the resulting DOM is live or typeset as math.
//
// Two entry points, both installed on window.__acpOracle by the setup function
// this file evaluates to:
//   setup()                    find the registry, make a notebook-like clone
//   render(items) -> results   items: [{mime, source, trusted}], results:
//                              [{findings: [...], text: "...", html: "..."}]
async () => {
  const app = window.jupyterapp;
  if (!app) throw new Error('window.jupyterapp is missing (start JupyterLab with --LabApp.expose_app_in_browser=True)');
  await app.restored;
  const plugin = app.pluginRegistry._plugins.get('@jupyterlab/rendermime-extension:plugin');
  if (!plugin) throw new Error('no @jupyterlab/rendermime-extension:plugin in this JupyterLab');
  const root = await app.resolveRequiredService(plugin.provides);
  // A notebook's outputs use a clone of the application registry with a URL
  // resolver for the notebook's path (relative links are resolved by it).
  const Resolver = root.constructor.UrlResolver;
  const resolver = Resolver ? new Resolver({path: 'fuzz/notebook.ipynb', contents: app.serviceManager.contents}) : null;
  const rm = root.clone({resolver});
  if (!rm.markdownParser) throw new Error('the registry has no markdown parser');
  if (!rm.latexTypesetter) throw new Error('the registry has no LaTeX typesetter');

  // Payloads record themselves here if they ever run.
  window.__acp_pwned = window.__acp_pwned || [];
  window.alert = (m) => window.__acp_pwned.push('alert:' + String(m).slice(0, 80));

  // Hosts are attached (MathJax typesets a rendered output when it is
  // attached, as an output area does) but far off screen.
  const container = document.createElement('div');
  container.id = 'acp-oracle';
  container.style.cssText = 'position:absolute;left:-20000px;top:0;width:800px;overflow:hidden;';
  document.body.appendChild(container);

  const BAD = new Set(['SCRIPT', 'IFRAME', 'FRAME', 'FRAMESET', 'OBJECT', 'EMBED', 'APPLET', 'IMG', 'IMAGE',
    'SVG', 'MATH', 'STYLE', 'FORM', 'INPUT', 'BUTTON', 'SELECT', 'TEXTAREA', 'META', 'LINK', 'BASE',
    'AUDIO', 'VIDEO', 'SOURCE', 'TRACK', 'PICTURE', 'PORTAL', 'TEMPLATE', 'NOSCRIPT', 'MARQUEE', 'DIALOG']);
  // Elements markdown, JupyterLab and acp_kernel's own templates make.
  const KNOWN = new Set(['DIV', 'SPAN', 'P', 'EM', 'STRONG', 'B', 'I', 'CODE', 'PRE', 'A', 'UL', 'OL', 'LI',
    'BLOCKQUOTE', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'HR', 'BR', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD',
    'DEL', 'S', 'SUB', 'SUP', 'DETAILS', 'SUMMARY', 'KBD', 'SMALL']);
  const SAFE_SCHEMES = ['http:', 'https:', 'mailto:'];
  const safeHref = (value) => {
    const squashed = value.replace(/[\x00-\x20]/g, '').toLowerCase();
    if (/^(javascript|vbscript|data|blob|file|filesystem):/.test(squashed)) return false;
    let url;
    try { url = new URL(value, document.baseURI); } catch (e) { return false; }
    return SAFE_SCHEMES.includes(url.protocol);
  };
  const snippet = (el) => el.outerHTML.slice(0, 200);
  // acp_kernel's own wrapper (safe._WRAP_OPEN): MathJax skips it and it is a style containment
  // scope; that one style, exactly, on that element, is ours. Any other style is a finding.
  const ownWrapper = (el) => el.tagName === 'DIV' && el.getAttribute('class') === 'tex2jax_ignore mathjax_ignore'
    && el.getAttribute('style') === 'contain: style';

  const scan = (host) => {
    const found = [];
    for (const el of host.querySelectorAll('*')) {
      const name = el.tagName.toUpperCase();
      if (name === 'MJX-CONTAINER') found.push('math ' + snippet(el).slice(0, 120));
      // MathJax's own output (and its assistive MathML) is judged as "math";
      // only handlers and links inside it are looked at as well.
      const inMath = !!el.closest('mjx-container');
      if (inMath || name.startsWith('MJX-')) {
        // fall through to the attribute checks
      } else if (name === 'INPUT' && el.closest('li') && el.getAttribute('type') === 'checkbox'
                 && el.hasAttribute('disabled')
                 && [...el.attributes].every((a) => ['type', 'disabled', 'checked', 'class'].includes(a.name))) {
        // a GFM task list item's box, as marked writes it: disabled, inert
      } else if (BAD.has(name)) found.push('element ' + snippet(el));
      else if (!KNOWN.has(name)) found.push('tag ' + snippet(el));
      for (const attr of el.attributes) {
        const n = attr.name.toLowerCase();
        if (n.startsWith('on')) found.push('handler ' + n + ' ' + snippet(el));
        else if (['src', 'srcdoc', 'srcset', 'action', 'formaction', 'poster', 'background', 'ping']
                 .includes(n) || (n === 'style' && !inMath && !name.startsWith('MJX-') && !ownWrapper(el)))
          found.push('attribute ' + n + ' ' + snippet(el));
        else if ((n === 'href' || n === 'xlink:href') && !safeHref(attr.value)) found.push('link ' + snippet(el));
      }
    }
    if (host.querySelector('.MathJax, .MathJax_Display, .MathJax_Preview')) found.push('math (MathJax 2 classes)');
    return found;
  };

  const flush = () => new Promise((resolve) => setTimeout(resolve, 0));

  // Two ways to render, the same DOM (tests/rendermime/test_oracle.py checks):
  // "attach": each output as an output area makes it (render, attach; MathJax
  // typesets on attach), slow; "batch": each rendered detached, then all in one
  // container that MathJax typesets at once (MathJax finds math only within
  // one element's text, so outputs do not mix), fast.
  const render = async (items, mode) => {
    const made = items.map((item) => {
      const model = rm.createModel({data: {[item.mime]: item.source}, trusted: !!item.trusted, metadata: {}});
      const widget = rm.createRenderer(item.mime);
      const done = widget.renderModel(model);
      if (mode === 'attach') widget.constructor.attach(widget, container);
      return {widget, done};
    });
    const errors = await Promise.all(made.map(({done}) => done.then(() => null, (e) => String(e))));
    let batch = null;
    if (mode === 'attach') {
      // MathJax runs after a render (renderHTML does not await it) and after attach.
      await flush();
      await rm.latexTypesetter.typeset(document.createElement('div'));
      await flush();
    } else {
      batch = document.createElement('div');
      for (const {widget} of made) batch.appendChild(widget.node);
      container.appendChild(batch);
      await rm.latexTypesetter.typeset(batch);
    }
    const results = made.map(({widget}, i) => {
      const findings = scan(widget.node);
      if (errors[i]) findings.push('render error ' + errors[i]);
      return {findings, text: widget.node.textContent, html: findings.length ? widget.node.innerHTML.slice(0, 4000) : ''};
    });
    for (const {widget} of made) widget.dispose();
    if (batch) batch.remove();
    const pwned = window.__acp_pwned.splice(0);
    return {results, pwned};
  };

  window.__acpOracle = {render, rm};
  return {
    mimeTypes: rm.mimeTypes,
    sanitizer: rm.sanitizer.constructor.name,
    typesetter: rm.latexTypesetter.constructor.name,
    version: app.version,
  };
}
