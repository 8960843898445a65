// The Close Board's only script: the passkey ceremonies (enrol, sign in, sign a decision) with navigator.credentials.
// Served from /board/static/board.js under a Content-Security-Policy that allows no other script and no inline code.
"use strict";

(function () {
  function b64urlToBytes(text) {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    const binary = atob(base64);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
    return bytes.buffer;
  }

  function bytesToB64url(buffer) {
    const bytes = new Uint8Array(buffer);
    let binary = "";
    for (let i = 0; i < bytes.length; i += 1) binary += String.fromCharCode(bytes[i]);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function creationOptions(json) {
    const options = Object.assign({}, json);
    options.challenge = b64urlToBytes(json.challenge);
    options.user = Object.assign({}, json.user, { id: b64urlToBytes(json.user.id) });
    options.excludeCredentials = (json.excludeCredentials || []).map(function (c) {
      return Object.assign({}, c, { id: b64urlToBytes(c.id) });
    });
    return options;
  }

  function requestOptions(json) {
    const options = Object.assign({}, json);
    options.challenge = b64urlToBytes(json.challenge);
    options.allowCredentials = (json.allowCredentials || []).map(function (c) {
      return Object.assign({}, c, { id: b64urlToBytes(c.id) });
    });
    return options;
  }

  function registrationJSON(credential) {
    const r = credential.response;
    return {
      id: credential.id,
      rawId: bytesToB64url(credential.rawId),
      type: credential.type,
      response: {
        clientDataJSON: bytesToB64url(r.clientDataJSON),
        attestationObject: bytesToB64url(r.attestationObject),
        transports: r.getTransports ? r.getTransports() : [],
      },
      clientExtensionResults: credential.getClientExtensionResults(),
      authenticatorAttachment: credential.authenticatorAttachment || undefined,
    };
  }

  function assertionJSON(credential) {
    const r = credential.response;
    return {
      id: credential.id,
      rawId: bytesToB64url(credential.rawId),
      type: credential.type,
      response: {
        clientDataJSON: bytesToB64url(r.clientDataJSON),
        authenticatorData: bytesToB64url(r.authenticatorData),
        signature: bytesToB64url(r.signature),
        userHandle: r.userHandle ? bytesToB64url(r.userHandle) : undefined,
      },
      clientExtensionResults: credential.getClientExtensionResults(),
    };
  }

  async function post(url, body, csrf) {
    const headers = { "content-type": "application/json" };
    if (csrf) headers["x-csrf-token"] = csrf;
    const response = await fetch(url, {
      method: "POST",
      headers: headers,
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    const data = await response.json().catch(function () { return {}; });
    if (!response.ok) throw new Error(data.error || "the board answered " + response.status);
    return data;
  }

  function say(text, kind) {
    const status = document.getElementById("status");
    if (!status) return;
    status.textContent = text;
    status.className = "status " + (kind || "");
  }

  async function signIn() {
    say("Waiting for your passkey…");
    try {
      const begun = await post("/board/sign-in/options", {});
      const credential = await navigator.credentials.get({ publicKey: requestOptions(begun.options) });
      const done = await post("/board/sign-in", { response: assertionJSON(credential) });
      say("Signed in.", "ok");
      window.location.assign(done.next);
    } catch (error) {
      say("Sign-in failed: " + error.message, "error");
    }
  }

  async function enrol() {
    const token = new URLSearchParams(window.location.hash.slice(1)).get("token") || "";
    const label = document.getElementById("label").value;
    say("Waiting for your device…");
    try {
      const begun = await post("/board/enrol/options", { token: token });
      const credential = await navigator.credentials.create({ publicKey: creationOptions(begun.options) });
      const done = await post("/board/enrol", { token: token, label: label, response: registrationJSON(credential) });
      history.replaceState(null, "", window.location.pathname); // the one-time token leaves the address bar
      say("Your passkey is enrolled, " + begun.display_name + ". You can sign in with it now.", "ok");
      const next = document.createElement("a");
      next.href = done.next;
      next.id = "go-sign-in";
      next.textContent = "Sign in";
      document.getElementById("status").after(next);
    } catch (error) {
      say("Enrolment failed: " + error.message, "error");
    }
  }

  function amendment() {
    // Approve with edits: the sums and each filled-in line, as decimal text; the server checks every figure.
    const form = document.getElementById("amend");
    const lines = [];
    form.querySelectorAll("tr.amend-line").forEach(function (row) {
      const value = function (name) { return row.querySelector('input[name="' + name + '"]').value.trim(); };
      if (value("line") || value("proposed") || value("certified") || value("reason")) {
        lines.push({ line: value("line"), proposed: value("proposed"), certified: value("certified"), reason: value("reason") });
      }
    });
    return {
      currency: form.dataset.currency,
      proposed: form.dataset.proposed,
      certified: document.getElementById("amend-certified").value.trim(),
      lines: lines,
    };
  }

  async function decide(section, decision, amend) {
    const gate = section.dataset.gate;
    const csrf = section.dataset.csrf;
    const reason = document.getElementById("reason").value;
    say("Waiting for your passkey to sign your decision…");
    try {
      const base = "/board/gates/" + encodeURIComponent(gate) + "/decision";
      const asked = { decision: decision, reason: reason };
      if (amend) asked.amendment = amendment();
      const begun = await post(base + "/options", asked, csrf);
      const credential = await navigator.credentials.get({ publicKey: requestOptions(begun.options) });
      const signed = { response: assertionJSON(credential) };
      if (amend) signed.amendment = asked.amendment;
      const done = await post(base, signed, csrf);
      say("Recorded: the gate is " + done.status + ".", "ok");
      window.location.assign(done.next);
    } catch (error) {
      say("Not recorded: " + error.message, "error");
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    const signInButton = document.getElementById("sign-in");
    if (signInButton) signInButton.addEventListener("click", signIn);
    const enrolButton = document.getElementById("enrol");
    if (enrolButton) enrolButton.addEventListener("click", enrol);
    const section = document.getElementById("decide");
    if (section) {
      section.querySelectorAll("button[data-decision]").forEach(function (button) {
        button.addEventListener("click", function () {
          decide(section, button.dataset.decision, button.dataset.amend === "yes");
        });
      });
    }
  });
})();
