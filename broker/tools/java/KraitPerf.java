// `krait perf --client java`: one producer or consumer process on the Java kafka-clients
// library, in the spirit of Kafka's ProducerPerformance / ConsumerPerformance.
//
// Driven by broker/tools/perf_java.py, which compiles this file, starts one or several of
// these processes and sums their results. The protocol on stdin/stdout is line-based:
//   the process sets up (topic, metadata, connections, offsets), prints "READY",
//   waits for a line "GO" on stdin, runs the timed part and prints "RESULT {json}".
// Errors are printed as "RESULT {"error": ...}" too, so the driver always gets a row.
//
// Usage: KraitPerf produce|consume --bootstrap-server H:P --topic T --num-records N
//        [--record-size S] [--partitions P] [--acks A] [--compression C] [--throughput R]
//        [--linger-ms L] [--fetch-wait-ms W] [--timeout S] [--idle-timeout S]
//        [--index I --count K] [--latency-samples M] [--prop k=v]...

import java.lang.management.ManagementFactory;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KraitPerf {
    static final Map<String, String> opts = new HashMap<>();
    static final List<String> props = new ArrayList<>();

    static String opt(String k, String dflt) { return opts.getOrDefault(k, dflt); }
    static long optLong(String k, long dflt) { return opts.containsKey(k) ? Long.parseLong(opts.get(k)) : dflt; }
    static double optDouble(String k, double dflt) {
        return opts.containsKey(k) ? Double.parseDouble(opts.get(k)) : dflt;
    }

    /** CPU nanoseconds of this JVM, every thread (GC and the client's I/O threads included). */
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    static long epochNanos() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    static String jsonString(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static void result(String json) {
        System.out.println("RESULT " + json);
        System.out.flush();
    }

    static void readyThenWait() throws Exception {
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        if (line == null || !line.trim().equals("GO")) throw new IllegalStateException("driver went away");
    }

    static void applyProps(Properties p) {
        for (String kv : props) {
            int i = kv.indexOf('=');
            if (i <= 0) throw new IllegalArgumentException("expected key=value, got " + kv);
            p.put(kv.substring(0, i).trim(), kv.substring(i + 1).trim());
        }
    }

    /** Partitions of the topic, creating it (once, whoever wins) with --partitions if missing. */
    static List<PartitionInfo> ensureTopic(String bootstrap, String topic, int partitions, boolean create,
                                           long timeoutMs) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            if (create && !admin.listTopics().names().get().contains(topic)) {
                try {
                    admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) throw e;
                }
            }
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> md = new KafkaConsumer<>(c)) {
            while (true) {
                List<PartitionInfo> parts = md.partitionsFor(topic, Duration.ofMillis(Math.max(1000, timeoutMs)));
                if (parts != null && !parts.isEmpty() && (!create || parts.size() >= partitions
                        || System.currentTimeMillis() > deadline)) return parts;
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("topic " + topic + " not found");
                Thread.sleep(100);
            }
        }
    }

    static final class Stats {
        long acked, errors;
        String firstError;
        final float[] samples;
        int nsamples;
        Stats(int cap) { samples = new float[cap]; }
    }

    static void produce() throws Exception {
        String bootstrap = opt("bootstrap-server", null), topic = opt("topic", null);
        long n = optLong("num-records", 0);
        int size = (int) optLong("record-size", 100);
        double rate = optDouble("throughput", -1);
        long timeoutMs = (long) (optDouble("timeout", 300) * 1000);
        int nparts = ensureTopic(bootstrap, topic, (int) optLong("partitions", 1), true, timeoutMs).size();
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", opt("acks", "1"));
        p.put("compression.type", opt("compression", "none"));
        p.put("linger.ms", String.valueOf((long) optDouble("linger-ms", 5)));
        p.put("batch.size", "1000000");
        p.put("buffer.memory", String.valueOf(256L << 20));
        p.put("max.request.size", "10485760");
        p.put("enable.idempotence", "false");
        p.put("delivery.timeout.ms", String.valueOf(Math.max(timeoutMs, 30000)));
        p.put("request.timeout.ms", "30000");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        applyProps(p);
        byte[] payload = new byte[size];
        Random rnd = new Random(42);
        for (int i = 0; i < size; i++) payload[i] = (byte) (65 + rnd.nextInt(26));
        int maxSamples = (int) Math.max(1, Math.min(n, optLong("latency-samples", 20000)));
        long every = Math.max(1, n / maxSamples);
        Stats st = new Stats((int) Math.min(n / every + 1, Integer.MAX_VALUE - 8));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        producer.partitionsFor(topic);  // metadata before the clock starts
        readyThenWait();
        long cpu0 = cpuNanos(), t0 = System.nanoTime(), start = epochNanos();
        for (long i = 0; i < n; i++) {
            if (rate > 0) {
                long due = t0 + (long) (i * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 200_000) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
            final long sent = System.nanoTime();
            final boolean sample = i % every == 0;
            Callback cb = (RecordMetadata md, Exception e) -> {
                if (e != null) {
                    if (st.errors++ == 0) st.firstError = e.toString();
                } else {
                    st.acked++;
                    if (sample && st.nsamples < st.samples.length)
                        st.samples[st.nsamples++] = (System.nanoTime() - sent) / 1e6f;
                }
            };
            producer.send(new ProducerRecord<>(topic, payload), cb);
        }
        long tSent = System.nanoTime();
        producer.flush();
        long t1 = System.nanoTime(), end = epochNanos(), cpu = cpuNanos() - cpu0;
        StringBuilder lat = new StringBuilder("[");
        for (int i = 0; i < st.nsamples; i++) {
            if (i > 0) lat.append(',');
            lat.append(String.format("%.3f", st.samples[i]));
        }
        lat.append(']');
        result("{\"mode\":\"produce\",\"records\":" + n + ",\"partitions\":" + nparts + ",\"acked\":" + st.acked + ",\"errors\":" + st.errors
               + ",\"first_error\":" + (st.firstError == null ? "null" : jsonString(st.firstError))
               + ",\"start_ns\":" + start + ",\"end_ns\":" + end + ",\"seconds\":" + (t1 - t0) / 1e9
               + ",\"send_seconds\":" + (tSent - t0) / 1e9 + ",\"cpu_seconds\":" + cpu / 1e9
               + ",\"bytes\":" + st.acked * size + ",\"latency_sample_every\":" + every
               + ",\"ack_latency_ms\":" + lat + "}");
        producer.close(Duration.ofSeconds(5));
    }

    static void consume() throws Exception {
        String bootstrap = opt("bootstrap-server", null), topic = opt("topic", null);
        long n = optLong("num-records", 0);
        int index = (int) optLong("index", 0), count = (int) optLong("count", 1);
        long timeoutMs = (long) (optDouble("timeout", 300) * 1000);
        long idleMs = (long) (optDouble("idle-timeout", 10) * 1000);
        List<PartitionInfo> parts = ensureTopic(bootstrap, topic, 1, false, timeoutMs);
        List<TopicPartition> all = new ArrayList<>();
        for (PartitionInfo pi : parts) all.add(new TopicPartition(topic, pi.partition()));
        all.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("fetch.max.wait.ms", opt("fetch-wait-ms", "100"));
        p.put("fetch.max.bytes", "52428800");
        p.put("max.partition.fetch.bytes", String.valueOf(4 * 1048576));
        p.put("max.poll.records", "100000");
        p.put("receive.buffer.bytes", String.valueOf(4 * 1048576));
        p.put("check.crcs", "false");
        p.put("client.id", "krait-perf-java-" + index);
        applyProps(p);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        // The same offsets snapshot in every process: --num-records is shared out over the
        // partitions in proportion to what each holds, and process `index` reads the
        // partitions p with p % count == index.
        Map<TopicPartition, Long> begin = consumer.beginningOffsets(all), endOff = consumer.endOffsets(all);
        long total = 0;
        long[] avail = new long[all.size()], limit = new long[all.size()];
        for (int i = 0; i < all.size(); i++) {
            avail[i] = Math.max(0, endOff.get(all.get(i)) - begin.get(all.get(i)));
            total += avail[i];
        }
        long given = 0;
        for (int i = 0; i < all.size(); i++) {
            limit[i] = total <= n ? avail[i] : (long) ((double) n * avail[i] / total);
            given += limit[i];
        }
        for (int i = 0; given < Math.min(n, total) && i < all.size(); i = (i + 1) % all.size()) {
            if (limit[i] < avail[i]) { limit[i]++; given++; }
        }
        Map<TopicPartition, long[]> remaining = new HashMap<>();
        long expected = 0;
        List<TopicPartition> mine = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            if (all.get(i).partition() % count != index) continue;
            mine.add(all.get(i));
            remaining.put(all.get(i), new long[]{limit[i]});
            expected += limit[i];
        }
        consumer.assign(mine);
        for (TopicPartition tp : mine) consumer.seek(tp, begin.get(tp));
        for (TopicPartition tp : mine) if (remaining.get(tp)[0] == 0) consumer.pause(List.of(tp));
        readyThenWait();
        long cpu0 = cpuNanos(), t0 = System.nanoTime(), start = epochNanos();
        long got = 0, bytes = 0, tLast = t0, endNs = start, polls = 0;
        int open = 0;
        for (TopicPartition tp : mine) if (remaining.get(tp)[0] > 0) open++;
        long deadline = t0 + timeoutMs * 1_000_000L;
        String error = null;
        while (open > 0) {
            long now = System.nanoTime();
            if (now > deadline) { error = "timeout after " + timeoutMs / 1000.0 + " s"; break; }
            if (now - tLast > idleMs * 1_000_000L) { error = "nothing for " + idleMs / 1000.0 + " s"; break; }
            ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
            polls++;
            if (recs.isEmpty()) continue;
            for (TopicPartition tp : recs.partitions()) {
                long[] rem = remaining.get(tp);
                if (rem == null || rem[0] == 0) continue;
                List<ConsumerRecord<byte[], byte[]>> list = recs.records(tp);
                int take = (int) Math.min(rem[0], list.size());
                for (int i = 0; i < take; i++) {
                    byte[] v = list.get(i).value();
                    if (v != null) bytes += v.length;
                }
                got += take;
                rem[0] -= take;
                if (rem[0] == 0) { consumer.pause(List.of(tp)); open--; }
            }
            tLast = System.nanoTime();
            endNs = epochNanos();
        }
        long cpu = cpuNanos() - cpu0;
        result("{\"mode\":\"consume\",\"records\":" + got + ",\"expected\":" + expected + ",\"bytes\":" + bytes
               + ",\"partitions\":" + all.size() + ",\"assigned\":" + mine.size() + ",\"available\":" + total
               + ",\"start_ns\":" + start + ",\"end_ns\":" + endNs + ",\"seconds\":" + (tLast - t0) / 1e9
               + ",\"cpu_seconds\":" + cpu / 1e9 + ",\"polls\":" + polls
               + ",\"error\":" + (error == null ? "null" : jsonString(error)) + "}");
        consumer.close(Duration.ofSeconds(2));
    }

    public static void main(String[] argv) {
        try {
            if (argv.length < 1) throw new IllegalArgumentException("usage: KraitPerf produce|consume --key value ...");
            for (int i = 1; i < argv.length; i++) {
                if (!argv[i].startsWith("--") || i + 1 >= argv.length)
                    throw new IllegalArgumentException("bad argument " + argv[i]);
                String k = argv[i].substring(2), v = argv[++i];
                if (k.equals("prop")) props.add(v); else opts.put(k, v);
            }
            if (argv[0].equals("produce")) produce();
            else if (argv[0].equals("consume")) consume();
            else throw new IllegalArgumentException("unknown mode " + argv[0]);
            System.exit(0);
        } catch (Throwable t) {
            result("{\"error\":" + jsonString(t.toString()) + "}");
            System.exit(1);
        }
    }
}
