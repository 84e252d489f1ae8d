import threading
from array import array

from minihpc.validate import ps


def vec(*xs):
    return array("d", xs).tobytes()


def test_average_is_elementwise():
    assert array("d", ps.average([vec(1.0, 2.0), vec(3.0, 6.0)])).tolist() == [2.0, 4.0]


def test_all_arrive_no_skips():
    server = ps.Server(world=2, timeout=5.0)
    out = {}
    threads = [threading.Thread(target=lambda r=r: out.__setitem__(r, server.collect(r, 0, float(r), vec(r, 2.0 * r))))
               for r in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    grad, loss, arrived = out[0]
    assert array("d", grad).tolist() == [0.5, 1.0] and loss == 0.5 and arrived == [0, 1] and out[1] == out[0]
    assert server.summary()["skipped_total"] == 0
    server.close()


def test_a_worker_past_the_timeout_is_skipped_and_still_answered():
    server = ps.Server(world=2, timeout=0.1)
    grad, loss, arrived = server.collect(0, 0, 1.0, vec(4.0))
    assert arrived == [0] and array("d", grad).tolist() == [4.0]
    assert server.collect(1, 0, 3.0, vec(8.0)) == (grad, loss, arrived)  # late: gets the average it missed
    summary = server.summary()
    assert summary["skipped"] == {"0": [1]} and summary["late"] == {"0": [1]} and summary["skipped_total"] == 1
    server.close()


def test_wire_round_trip_over_a_socket():
    import socket

    a, b = socket.socketpair()
    ps.send(a, {"rank": 3, "step": 7}, vec(1.5))
    header, values = ps.recv(b)
    assert header["rank"] == 3 and array("d", values).tolist() == [1.5]
    a.close()
    assert ps.recv(b) is None
    b.close()
