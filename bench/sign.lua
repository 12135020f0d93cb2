-- wrk script used by bench/sign.py: POST the signing request body, count non-2xx answers and
-- print one machine-readable result line.
--
--   BENCH_BODY_FILE=body.json BENCH_API_KEY=... \
--     wrk -t1 -c32 -d8s -s bench/sign.lua http://127.0.0.1:PORT/wallets/signatures
--
-- BENCH_API_KEY is optional (the ceiling endpoint ignores it); several, comma-separated, are
-- taken in turn.

local function read_file(path)
  local file = assert(io.open(assert(path, "BENCH_BODY_FILE is not set"), "rb"))
  local text = file:read("*a")
  file:close()
  return text
end

wrk.method = "POST"
wrk.body = read_file(os.getenv("BENCH_BODY_FILE"))
wrk.headers["Content-Type"] = "application/json"
-- BENCH_API_KEY may list several keys, comma-separated: each request takes the next one.
local keys = {}
for key in string.gmatch(os.getenv("BENCH_API_KEY") or "", "[^,]+") do
  table.insert(keys, key)
end
if #keys == 1 then
  wrk.headers["Authorization"] = "Bearer " .. keys[1]
elseif #keys > 1 then
  local sent = 0
  request = function()
    sent = sent + 1
    local headers = {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer " .. keys[sent % #keys + 1],
    }
    return wrk.format(nil, nil, headers, wrk.body)
  end
end

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  non2xx = 0
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("non2xx")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,'
      .. '"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, bad, e.connect + e.read + e.write,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max))
end
