"""The wire: what crosses a socket, and nothing else.

  protocol   the protocol defined once: names, codes, close codes, frame builders
  links      the page links (room and token in the fragment) every side prints
  codec      frames <-> MessagePack / JSON, by the connection's subprotocol
  bounds     what the codec refuses while decoding (nesting, integer range)

Importing these (as the Python client does) loads no server code.
"""
