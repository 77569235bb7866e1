// The page of `dirigent inspect --stately`: frames the Stately inspector and hands it the inspection events the
// bridge's WebSocket sends. It never writes to the WebSocket, and posts the events to the Stately inspector's origin
// only (the origin of the frame's configured address), so a frame that navigated elsewhere receives nothing.

const frame = document.getElementById("inspector");
const address = frame.dataset.src;
const target = new URL(address).origin;
const buffer = [];
let connected = false;

window.addEventListener("message", (e) => {
  if (e.source !== frame.contentWindow) return;
  if (e.data && e.data.type === "@statelyai.connected") {
    connected = true;
    for (const event of buffer.splice(0)) frame.contentWindow.postMessage(event, target);
  }
});

// The inspector is loaded only now that the listener above is in place: it says it is connected once, as soon as it
// runs, and a frame loaded with the page could say so before this module ran (the events then waited for good).
frame.src = address;

const ws = new WebSocket(`ws://${location.host}/`);
ws.onmessage = (message) => {
  const data = JSON.parse(message.data);
  if (connected) frame.contentWindow.postMessage(data, target);
  else buffer.push(data);
};
