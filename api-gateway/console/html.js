// Preact's h bound to htm's tagged templates: components are written as
// html`<p>${text}</p>`, which the browser runs as it is (no build step).
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
