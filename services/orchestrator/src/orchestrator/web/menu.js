// The sessions menu on a narrow screen: the sidebar slides over the page from a menu button.

import { $ } from "/static/render.js";

// The width below which style.css hides the sidebar behind the menu button (keep in step).
const NARROW = window.matchMedia("(max-width: 760px)");

export function menuIsOpen() {
  return $("sidebar").classList.contains("open");
}

// Opens the sidebar over the page and moves the focus into it.
export function openMenu() {
  if (!NARROW.matches) return; // on a wide screen the sidebar is always there
  $("sidebar").classList.add("open");
  $("menu").setAttribute("aria-expanded", "true");
  $("backdrop").hidden = false;
  $("new-session").focus();
}

// Closes it; `returnFocus` puts the focus back on the menu button (after Escape).
export function closeMenu(returnFocus = false) {
  if (!menuIsOpen()) return;
  $("sidebar").classList.remove("open");
  $("menu").setAttribute("aria-expanded", "false");
  $("backdrop").hidden = true;
  if (returnFocus) $("menu").focus();
}

export function wireMenu() {
  $("menu").addEventListener("click", () => (menuIsOpen() ? closeMenu() : openMenu()));
  $("backdrop").addEventListener("click", () => closeMenu());
  // Widening the window (a phone turned sideways) shows the sidebar in its column again.
  NARROW.addEventListener("change", () => closeMenu());
}
