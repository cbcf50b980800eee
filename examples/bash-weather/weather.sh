#!/usr/bin/env bash
# weather: an animaworks-tool tool in plain bash, no SDK (protocol.md is the whole contract).
# The forecasts are made up from the city's name, so the tool runs offline and always gives the same answer.
set -u

if [ "${1:-}" = --schemas ]; then
  cat <<'JSON'
{
  "protocol": 1,
  "name": "weather",
  "version": "0.1.0",
  "description": "Made-up weather forecasts for a few cities; an example tool in plain bash.",
  "events": true,
  "actions": [
    {
      "name": "forecast",
      "description": "Forecast the next days for a city (tokyo, paris, oslo, lima).",
      "input_schema": {
        "type": "object",
        "properties": {
          "city": {"type": "string", "description": "The city, lower case", "examples": ["tokyo"]},
          "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3, "description": "How many days"}
        },
        "required": ["city"]
      },
      "profile": {"expected_seconds": 1, "hints": {"read_only": true, "idempotent": true}}
    },
    {
      "name": "cities",
      "description": "The cities this tool knows.",
      "input_schema": {"type": "object"},
      "profile": {"expected_seconds": 1, "hints": {"read_only": true, "idempotent": true}}
    }
  ]
}
JSON
  exit 0
fi

if [ -t 0 ]; then
  echo "weather: an animaworks-tool tool; run it through the runner: animaworks-tool weather --help" >&2
  exit 2
fi

# One request line on stdin. Without jq, pull the few fields out with sed: the runner has already validated
# the arguments against input_schema, so they have the shapes declared there.
IFS= read -r req || true
field_string() { printf '%s' "$req" | sed -n -E "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"(([^\"\\\\]|\\\\.)*)\".*/\\1/p"; }
field_int() { printf '%s' "$req" | sed -n -E "s/.*\"$1\"[[:space:]]*:[[:space:]]*(-?[0-9]+).*/\\1/p"; }

name=$(field_string name)
args=$(printf '%s' "$req" | sed -n -E 's/.*"args"[[:space:]]*:[[:space:]]*(\{[^{}]*\}).*/\1/p')

emit() { printf '%s\n' "$1"; }
fail() { # code message hint
  emit "{\"type\":\"error\",\"code\":\"$1\",\"message\":\"$2\",\"hint\":\"$3\"}"
  exit 1
}

known="tokyo paris oslo lima"
case "$name" in
  weather_cities)
    emit '{"type":"result","result":["tokyo","paris","oslo","lima"]}'
    ;;
  weather_forecast)
    req=$args
    city=$(field_string city)
    days=$(field_int days)
    days=${days:-3}
    case " $known " in
      *" $city "*) ;;
      *) fail unknown_city "no forecast for the city \\\"$city\\\"" "known cities: ${known// /, }" ;;
    esac
    skies=("sunny" "cloudy" "rain" "snow" "windy")
    seed=${#city}
    items=""
    for ((d = 1; d <= days; d++)); do
      emit "{\"type\":\"progress\",\"progress\":$d,\"total\":$days,\"message\":\"day $d of $days\"}"
      sky=${skies[$(((seed + d) % 5))]}
      high=$(((seed * 3 + d * 2) % 30))
      items+="${items:+,}{\"day\":$d,\"sky\":\"$sky\",\"high_c\":$high}"
    done
    emit "{\"type\":\"log\",\"level\":\"info\",\"message\":\"forecast for $city made up\"}"
    emit "{\"type\":\"result\",\"result\":{\"city\":\"$city\",\"days\":[$items]}}"
    ;;
  *)
    fail unknown_action "weather has no action \\\"$name\\\"" "see weather --schemas"
    ;;
esac
